import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../compose.js';
import type { AdminService, Session } from '../services/admins.js';
import type { Project } from '../services/projects.js';
import type { UsageService } from '../services/usage.js';
import type { Assets } from './assets.js';
import { helpers } from './format.js';
import { fieldsOf, idParam, refusal, type Fields } from './forms.js';
import { VERSION } from '../version.js';

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

/** What a view is given, besides the helpers and values every view gets. */
export type ViewData = Record<string, unknown>;

/** A page of one project (`/projects/:id/…`), and of one of its named things (`…/:name`). */
export type IdParams = { Params: { id: string } };
export type NameParams = { Params: { id: string; name: string } };

/**
 * Forms that carry a template's or a layout's whole bodies, percent-encoded (text up to 256 Ki
 * characters, HTML up to 512 Ki, sample data up to 64 Ki), far above the API's body limit.
 */
export const BODIES_FORM_LIMIT = { bodyLimit: 4 * 1024 * 1024 };

/**
 * Renders a page: the view with the layout and the values every page uses. All values reach the
 * HTML through eta's escaping `<%= %>`; `<%~ %>` inserts only what eta itself rendered (the page
 * body into the layout, and partials), never a value.
 */
export async function page(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  view: string,
  data: ViewData,
  status = 200,
): Promise<FastifyReply> {
  return fragment(
    request,
    reply,
    view,
    {
      ...data,
      assets: deps.assets.urls,
      version: VERSION,
      admin: request.dashSession?.admin ?? null,
      path: request.url.split('?')[0],
      origin: deps.services.config.publicUrl ?? `${request.protocol}://${request.host}`,
    },
    status,
  );
}

/** The error page: what went wrong, in words for the admin, under its status code. */
export function errorPage(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  status: number,
  message: string,
  title = `Error ${status}`,
): Promise<FastifyReply> {
  return page(request, reply, deps, 'error', { title, status, message }, status);
}

/** A fragment for htmx (no layout): the same escaping, swapped into the page by htmx. */
export async function fragment(
  request: FastifyRequest,
  reply: FastifyReply,
  view: string,
  data: ViewData,
  status = 200,
): Promise<FastifyReply> {
  const html = await reply.viewAsync(view, { ...data, h: helpers, csrf: request.csrfToken, now: Date.now() });
  return reply.code(status).header('Cache-Control', 'no-store').type('text/html; charset=utf-8').send(html);
}

/**
 * A page that its forms show again: `show(request, reply, state, status)` renders the view with
 * the data `build` makes of the state (what was typed, an error, what was just created), under
 * the status that goes with it.
 */
export function formPage<S>(
  deps: DashboardDeps,
  view: string,
  build: (state: S, request: FastifyRequest, reply: FastifyReply) => ViewData | Promise<ViewData>,
) {
  return async (request: FastifyRequest, reply: FastifyReply, state: S, status = 200) =>
    page(request, reply, deps, view, await build(state, request, reply), status);
}

/**
 * The post of a form that changes a project's settings, at `path` (`/projects/:id…`): saved, back to
 * the same page with `?notice=saved`; refused, the form `show`s again with what was sent and why
 * (400). A project that is not there is a 404 page.
 */
export function settingsForm(
  app: FastifyInstance,
  path: string,
  save: (id: number, form: Fields) => Promise<unknown>,
  show: (
    request: FastifyRequest,
    reply: FastifyReply,
    state: { id: number; values: Fields; error: string },
    status: number,
  ) => Promise<unknown>,
): void {
  app.post<IdParams>(path, async (request, reply) => {
    const id = idParam(request.params.id);
    const form = fieldsOf(request.body);
    try {
      await save(id, form);
    } catch (error) {
      return show(request, reply, { id, values: form, error: refusal(error, 'PROJECT_NOT_FOUND') }, 400);
    }
    return reply.redirect(`${path.replace(':id', String(id))}?notice=saved`, 303);
  });
}

/** The notice a redirect asked its page to show (`?notice=saved`), from that page's own notices. */
export function notice(request: FastifyRequest, notices: Readonly<Record<string, string>>): string | null {
  const key = (request.query as Record<string, unknown>).notice;
  return typeof key === 'string' && Object.hasOwn(notices, key) ? notices[key]! : null;
}

/** The project a `/projects/:id/…` URL names; a 404 page when there is none (PROJECT_NOT_FOUND). */
export function projectOf(deps: DashboardDeps, params: { readonly id: string }): Promise<Project> {
  return deps.services.projects.get(idParam(params.id));
}

/**
 * `/projects/NAME/…`, typed by hand or taken from the CLI: a GET goes on to the same page at the
 * project's id, the dashboard's own address for it. A name no project has gets the 404 page.
 */
export async function redirectProjectName(
  deps: DashboardDeps,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply | undefined> {
  if (request.method !== 'GET' && request.method !== 'HEAD') return undefined;
  const ref = (request.params as { id?: unknown } | undefined)?.id;
  if (typeof ref !== 'string' || /^\d+$/.test(ref)) return undefined;
  if (!request.routeOptions.url?.startsWith('/projects/:id')) return undefined;
  const project = await deps.services.projects.resolve(ref);
  const after = request.url.slice('/projects/'.length);
  const end = after.search(/[/?]/);
  return reply.redirect(`/projects/${project.id}${end === -1 ? '' : after.slice(end)}`, 302);
}

/** True when htmx made the request (it then wants a fragment, not a whole page). */
export function isHtmx(request: FastifyRequest): boolean {
  return request.headers['hx-request'] === 'true';
}
