import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../compose.js';
import type { AdminService, Session } from '../services/admins.js';
import type { UsageService } from '../services/usage.js';
import type { Assets } from './assets.js';
import { helpers } from './format.js';

/** What every dashboard route module receives: the shared services plus the dashboard's own. */
export interface DashboardDeps {
  readonly services: Services;
  readonly admins: AdminService;
  readonly usage: UsageService;
  readonly assets: Assets;
}

export interface DashboardSession extends Session {
  /** The cookie value, kept for logout. */
  readonly token: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The logged-in admin's session; set for every route outside the public ones. */
    dashSession: DashboardSession | null;
    /** The CSRF token the page's forms carry: the session's, or the pre-session cookie's. */
    csrfToken: string;
  }
}

/**
 * Renders a page: the view with the layout and the values every page uses. All values reach the
 * HTML through eta's escaping `<%= %>`; the layout inserts only the rendered page body raw.
 */
export async function page(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  view: string,
  data: Record<string, unknown>,
  status = 200,
): Promise<FastifyReply> {
  const html = await reply.viewAsync(view, {
    ...data,
    h: helpers,
    assets: deps.assets.urls,
    csrf: request.csrfToken,
    admin: request.dashSession?.admin ?? null,
    path: request.url.split('?')[0],
    origin: deps.services.config.publicUrl?.replace(/\/+$/, '') ?? `${request.protocol}://${request.host}`,
    now: Date.now(),
  });
  return reply.code(status).header('Cache-Control', 'no-store').type('text/html; charset=utf-8').send(html);
}

/** A fragment for htmx (no layout): the same escaping, swapped into the page by htmx. */
export async function fragment(
  request: FastifyRequest,
  reply: FastifyReply,
  view: string,
  data: Record<string, unknown>,
  status = 200,
): Promise<FastifyReply> {
  const html = await reply.viewAsync(view, { ...data, h: helpers, csrf: request.csrfToken, now: Date.now() });
  return reply.code(status).header('Cache-Control', 'no-store').type('text/html; charset=utf-8').send(html);
}

/** True when htmx made the request (it then wants a fragment, not a whole page). */
export function isHtmx(request: FastifyRequest): boolean {
  return request.headers['hx-request'] === 'true';
}
