import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminTokenPrefix, wrongApiHint } from '../domain/admin-token.js';
import { givenCredentials } from './given-credentials.js';
import { bearerToken } from '../domain/api-key.js';
import { loggedTokenPrefix } from './api-log-hooks.js';
import { ErrorCode, errors, HeraldError, Messages } from '../domain/errors.js';
import type { AdminToken } from '../services/admin-tokens.js';
import type { Project } from '../services/projects.js';
import type { AdminDeps } from './admin-deps.js';
import { NoQuery } from './admin-schemas.js';
import { adminNotificationRoutes } from './admin-notifications.js';
import { adminProjectRoutes } from './admin-projects.js';
import { adminSettingsRoutes } from './admin-settings.js';
import { adminTemplateRoutes } from './admin-templates.js';
import { adminValidator } from './admin-validation.js';
import { sendError } from './errors.js';
import { sendContinue } from './expect-continue.js';
import { bodyText, NOT_UTF8_HINT, parseJson } from './check-body.js';
import { refuseEncodedBody } from './read-body.js';

export type { AdminDeps } from './admin-deps.js';

/** Where the management API lives (product.md §13). */
export const ADMIN_PREFIX = '/api/v1/admin';
const MAX_PATH = 500;
const ALL_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that only answers 405 for a method its URL does not take. */
    wrongMethod?: boolean;
  }
  interface FastifyRequest {
    /** The admin token of a management API call, once authenticated. */
    adminToken: AdminToken | null;
    /** The project a management API path names, once found. */
    adminProject: Project | null;
  }
}

/** Only `Authorization: Bearer hrla_…`; an API key, a revoked or a mistyped token is a 401. */
function authenticate(deps: AdminDeps) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const token = bearerToken(request.headers.authorization);
    let admin: AdminToken | null = null;
    try {
      admin = await deps.adminTokens.authenticate(token);
    } finally {
      request.apiLog.keyPrefix = admin === null ? loggedTokenPrefix(token) : adminTokenPrefix(token!);
    }
    if (admin === null) {
      reply.header('WWW-Authenticate', 'Bearer realm="herald-admin"');
      return sendError(
        reply,
        401,
        Messages.invalidAdminToken,
        wrongApiHint(givenCredentials(request), token, 'admin'),
      );
    }
    request.adminToken = admin;
  };
}

/**
 * A JSON body, and an empty body as none (clients send their usual Content-Type on a DELETE or a
 * POST without data); read as the notification API reads its bodies, refusing `__proto__` keys
 * with a hint that says so. Nothing but JSON is taken (415).
 */
function jsonBodies(admin: FastifyInstance): void {
  admin.removeAllContentTypeParsers();
  admin.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (body.length === 0) return done(null, undefined);
    const text = bodyText(body as Buffer);
    if (text === null) return done(errors.invalidJson(NOT_UTF8_HINT), undefined);
    const parsed = parseJson(text);
    if ('value' in parsed) done(null, parsed.value);
    else done(errors.invalidJson(parsed.hint), undefined);
  });
}

/**
 * Refuses a compressed body (415) before it is read, or asks a client that waits for `100
 * Continue` for its body (expect-continue.ts).
 */
async function continueAdmitted(request: FastifyRequest): Promise<void> {
  refuseEncodedBody(request);
  sendContinue(request);
}

/**
 * The management API: everything the dashboard manages, over the same services, under
 * /api/v1/admin. Every call is authenticated by an admin token (before its body is read), limited
 * per token, checked against its route's schema, and recorded in the audit log once answered.
 */
export async function adminApi(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  await app.register(
    async (admin) => {
      admin.decorateRequest('adminToken', null);
      admin.decorateRequest('adminProject', null);
      jsonBodies(admin);
      admin.setValidatorCompiler(adminValidator);
      admin.addHook('onRequest', authenticate(deps));
      // After authentication (a call without a valid token never counts), before the body is read.
      await admin.register(fastifyRateLimit, {
        max: deps.rateLimit,
        timeWindow: 60_000,
        hook: 'preParsing',
        keyGenerator: (request) => `admin-token:${request.adminToken?.id ?? 0}`,
        errorResponseBuilder: (_request, context) =>
          new HeraldError(
            ErrorCode.RateLimited,
            `Rate limit of ${context.max} calls per minute for this admin token exceeded; retry in ${context.after}`,
          ),
      });
      // A path that names a project names one that exists: the handlers get it found.
      admin.addHook('preHandler', async (request) => {
        const ref = (request.params as { project?: string } | undefined)?.project;
        if (ref === undefined || request.routeOptions.config.wrongMethod === true) return;
        const project = await deps.projects.get(ref);
        request.adminProject = project;
        request.apiLog.projectId = project.id;
      });
      admin.addHook('onResponse', async (request, reply) => {
        const token = request.adminToken;
        if (token === null) return;
        const url = request.url;
        const query = url.indexOf('?');
        deps.auditLog.record({
          created_at: Date.now(),
          token_id: token.id,
          token_name: token.name,
          method: request.method,
          path: (query === -1 ? url : url.slice(0, query)).slice(0, MAX_PATH),
          status_code: reply.statusCode,
          error: request.apiLog.error,
          project_id: request.adminProject?.id ?? null,
        });
      });
      const methods = new Map<string, Set<string>>();
      admin.addHook('onRoute', (route) => {
        // A parameter a route does not name is refused (a script's `?limit=` on a route without
        // pages would otherwise seem to work). The 405 routes answer before any check.
        if (route.schema?.querystring === undefined && route.config?.wrongMethod !== true)
          route.schema = { ...route.schema, querystring: NoQuery };
        // A client waiting to send its body is asked for it only once the rate limit let the call
        // through (the limit's hook was added to the route just before this one runs).
        route.config = { ...route.config, continueWhenAdmitted: true };
        route.preParsing = [route.preParsing ?? []].flat().concat(continueAdmitted);
        const url = route.url.slice(ADMIN_PREFIX.length);
        const set = methods.get(url) ?? new Set<string>();
        for (const method of [route.method].flat()) set.add(method);
        methods.set(url, set);
      });
      await adminProjectRoutes(admin, deps);
      await adminTemplateRoutes(admin, deps);
      await adminSettingsRoutes(admin, deps);
      await adminNotificationRoutes(admin, deps);
      // A wrong method on an admin path: 405 with the methods it takes (product.md §3).
      for (const [url, taken] of [...methods]) {
        const allow = [...taken].sort().join(', ');
        admin.route({
          method: ALL_METHODS.filter((m) => !taken.has(m)),
          url,
          schema: { hide: true },
          config: { wrongMethod: true },
          handler: (request, reply) => {
            reply.header('Allow', allow);
            return sendError(reply, 405, `Method ${request.method} is not allowed here; use ${allow}`);
          },
        });
      }
    },
    { prefix: ADMIN_PREFIX },
  );
}
