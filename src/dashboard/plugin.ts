import fastifyCookie from '@fastify/cookie';
import fastifyFormbody from '@fastify/formbody';
import fastifyRateLimit from '@fastify/rate-limit';
import fastifyView from '@fastify/view';
import { Eta } from 'eta';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AddressInfo } from 'node:net';
import type { Services } from '../compose.js';
import { HeraldError } from '../domain/errors.js';
import { statusOf } from '../http/errors.js';
import { urlHost } from '../domain/url-host.js';
import type { HttpPlugin } from '../http/plugin.js';
import { loadAssets, VIEWS_DIR } from './assets.js';
import { errorPage, redirectProjectName, type DashboardDeps } from './context.js';
import { adminApiRoutes } from './routes-admin-api.js';
import { authRoutes, publicAuthRoutes } from './routes-auth.js';
import { logRoutes } from './routes-logs.js';
import { projectRoutes } from './routes-projects.js';
import { smtpRoutes } from './routes-smtp.js';
import { suppressionRoutes } from './routes-suppressions.js';
import { templateRoutes } from './routes-templates.js';
import { templateHistoryRoutes } from './routes-template-history.js';
import { layoutRoutes } from './routes-layouts.js';
import { usageRoutes } from './routes-usage.js';
import { webhookRoutes } from './routes-webhooks.js';
import { secretsMatch } from '../security/token.js';
import {
  comesFromElsewhere,
  PRE_SESSION_COOKIE,
  sentCsrfToken,
  SESSION_COOKIE,
  setSecurityHeaders,
} from './security.js';

export interface DashboardOptions {
  /**
   * Receives the one-time setup link once the server listens, when no admin exists yet (the
   * browser tests take it from here). Either way it is logged at info level, which is how
   * `herald serve` shows it.
   */
  readonly onSetupLink?: (url: string) => void;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Where people reach this server: HERALD_PUBLIC_URL, else the address it listens on. */
function baseUrl(app: FastifyInstance, services: Services): string {
  if (services.config.publicUrl !== null) return services.config.publicUrl;
  const address = app.server.address() as AddressInfo | null;
  const port = address?.port ?? services.config.port;
  const host = services.config.host;
  const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : urlHost(host);
  return `http://${shown}:${port}`;
}

export function createDashboardPlugin(options: DashboardOptions = {}): HttpPlugin {
  return async (app, services) => {
    const deps: DashboardDeps = {
      services,
      admins: services.admins,
      usage: services.usage,
      assets: await loadAssets(),
    };
    const setupToken = (await deps.admins.hasAdmins()) ? null : await deps.admins.createSetupToken();
    const httpsPublicUrl = services.config.publicUrl?.startsWith('https://') ?? false;
    const publicOrigin =
      services.config.publicUrl === null ? null : new URL(services.config.publicUrl).origin;
    const isSecure = (request: FastifyRequest) => httpsPublicUrl || request.protocol === 'https';

    // Everything below lives in its own encapsulated context: the form parser, cookies, views, the
    // error handler and the hooks apply to dashboard routes only, and /api/v1 keeps its behaviour.
    await app.register(async (dash) => {
      await dash.register(fastifyCookie);
      await dash.register(fastifyFormbody);
      await dash.register(fastifyRateLimit, { global: false });
      await dash.register(fastifyView, {
        engine: { eta: new Eta({ views: VIEWS_DIR, autoEscape: true, cache: services.config.production }) },
        root: VIEWS_DIR,
        production: services.config.production,
      });
      dash.decorateRequest('dashSession', null);
      dash.decorateRequest('csrfToken', '');

      dash.addHook('onSend', async (request, reply) => {
        setSecurityHeaders(reply, isSecure(request));
      });

      // Every state-changing request carries the CSRF token of its session (or, before login, of
      // the pre-session cookie) in a form field or header. A cross-site POST, or one from another
      // origin than the public one, is refused outright.
      dash.addHook('preHandler', async (request, reply) => {
        if (SAFE_METHODS.has(request.method)) return;
        const expected = request.dashSession?.csrfToken ?? request.cookies[PRE_SESSION_COOKIE] ?? '';
        if (comesFromElsewhere(request, publicOrigin) || !secretsMatch(sentCsrfToken(request), expected)) {
          return showError(
            request,
            reply,
            403,
            'This form has expired or did not come from the dashboard. Reload the page and try again.',
          );
        }
      });

      const showError = (request: FastifyRequest, reply: FastifyReply, status: number, message: string) =>
        errorPage(request, reply, deps, status, message);

      dash.setErrorHandler(async (error: FastifyError, request, reply) => {
        if (error instanceof HeraldError) return showError(request, reply, statusOf(error), error.message);
        const status = error.statusCode ?? 500;
        if (status === 429)
          return showError(request, reply, 429, `Too many attempts. ${error.message}. Wait and try again.`);
        if (status >= 400 && status < 500)
          return showError(request, reply, status, 'The request could not be understood.');
        request.log.error({ err: error }, 'dashboard request failed');
        return showError(request, reply, 500, 'Something went wrong. The error has been logged.');
      });

      for (const [name, asset] of deps.assets.files) {
        dash.get(`/assets/${name}`, async (request, reply) => {
          // Asset URLs carry the content hash, so a cached copy is never stale.
          const versioned = (request.query as Record<string, unknown>).v === asset.version;
          return reply
            .type(asset.type)
            .header('Cache-Control', versioned ? 'public, max-age=31536000, immutable' : 'no-cache')
            .header('ETag', `"${asset.version}"`)
            .send(asset.body);
        });
      }

      await dash.register(async (open) => publicAuthRoutes(open, deps, isSecure));

      await dash.register(async (admin) => {
        admin.addHook('onRequest', async (request, reply) => {
          const token = request.cookies[SESSION_COOKIE] ?? '';
          const session = token === '' ? null : await deps.admins.session(token);
          if (session === null) {
            if (SAFE_METHODS.has(request.method))
              return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`);
            return showError(request, reply, 403, 'You are not logged in. Log in and try again.');
          }
          request.dashSession = { ...session, token };
          request.csrfToken = session.csrfToken;
        });
        admin.addHook('preHandler', async (request, reply) => redirectProjectName(deps, request, reply));
        admin.get('/', async (_request, reply) => reply.redirect('/projects'));
        await authRoutes(admin, deps, isSecure);
        await projectRoutes(admin, deps);
        await templateRoutes(admin, deps);
        await templateHistoryRoutes(admin, deps);
        await layoutRoutes(admin, deps);
        await smtpRoutes(admin, deps);
        await logRoutes(admin, deps);
        await usageRoutes(admin, deps);
        await webhookRoutes(admin, deps);
        await suppressionRoutes(admin, deps);
        await adminApiRoutes(admin, deps);
      });
    });

    if (setupToken !== null) {
      app.addHook('onListen', async () => {
        const url = `${baseUrl(app, services)}/setup/${setupToken}`;
        services.logger.info(
          { setupUrl: url },
          `Dashboard setup: open ${url} to create the first admin (the link works until it is used)`,
        );
        // The log line is the one place the link is printed: readable in a terminal, JSON otherwise.
        // Nothing else prints it: onSetupLink only hands it on.
        options.onSetupLink?.(url);
      });
    }
  };
}

/** The dashboard as the api role serves it (src/cli/serve-commands.ts). */
export const dashboardPlugin: HttpPlugin = createDashboardPlugin();
