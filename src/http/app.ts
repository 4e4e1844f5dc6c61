import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AcceptService } from '../services/accept.js';
import type { ApiLogService } from '../services/api-log.js';
import type { NotificationService } from '../services/notifications.js';
import type { ProjectService } from '../services/projects.js';
import type { Storage } from '../storage/storage.js';
import { adminApi, type AdminDeps } from './admin-api.js';
import { registerApiLog } from './api-log-hooks.js';
import { BACK_TO_DASHBOARD, faviconRoutes, LOGO_SVG, MARK_SVG } from './brand.js';
import { BODY_LIMIT, OPENAPI, apiRoutes } from './api-routes.js';
import { answerExpectContinue } from './expect-continue.js';
import { clientErrorHandler, errorHandler, frameworkErrorHandler, notFoundHandler } from './errors.js';
import {
  capConnectionsPerClient,
  CONNECTIONS_CHECK_MS,
  DEFAULT_CLIENT_LIMITS,
  type ClientLimits,
} from './client-limits.js';
import { healthRoutes } from './health.js';
import { metricsRoutes, type MetricsRouteOptions } from './metrics-routes.js';
import { requestLogger } from './request-logger.js';

export { BODY_LIMIT };

export interface AppDeps extends Omit<AdminDeps, 'rateLimit'> {
  readonly config: Pick<Config, 'adminRateLimit'>;
  readonly logger: Logger;
  readonly storage: Storage;
  readonly projects: ProjectService;
  readonly accept: AcceptService;
  readonly notifications: NotificationService;
  readonly apiLogs: ApiLogService;
  /** `GET /metrics` and the request timers; left out, the app has no metrics endpoint. */
  readonly metricsRoute?: MetricsRouteOptions;
  /** Slow and greedy clients (client-limits.ts); the defaults when left out. */
  readonly clientLimits?: ClientLimits;
  /** Registers more routes (the dashboard) on the same server. */
  readonly plugins?: readonly ((app: FastifyInstance) => Promise<void>)[];
}

/** Builds the HTTP app without listening, so tests drive it through `inject`. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const limits = deps.clientLimits ?? DEFAULT_CLIENT_LIMITS;
  const app: FastifyInstance = Fastify({
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
    },
    // Fastify sets the server's requestTimeout again from its own option (0, none, by default).
    requestTimeout: limits.requestTimeoutMs,
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Requests are recorded in the API log; a log line per request would only add cost.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: requestLogger,
    bodyLimit: BODY_LIMIT,
    trustProxy: false,
    return503OnClosing: true,
    // Keys in the path are never logged; request ids are ours.
    requestIdHeader: false,
    // The router's own limit (100 by default) would answer a long request_id with a bare 414
    // before authentication; the real bound is Node's 16 KiB header limit, and the route answers
    // any id it never issued with 404 Notification not found (spec §4.2).
    routerOptions: { maxParamLength: 16 * 1024 },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  });
  const refused = deps.metricsRoute?.metrics.httpConnectionsRefused;
  capConnectionsPerClient(app.server, limits.maxConnectionsPerClient, () => refused?.inc());
  answerExpectContinue(app);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  registerApiLog(app, deps.apiLogs);
  if (deps.metricsRoute !== undefined) await metricsRoutes(app, deps.metricsRoute);
  await app.register(healthRoutes, { storage: deps.storage, accept: deps.accept });
  await app.register(faviconRoutes);
  await registerApiDocs(app);
  const metrics = deps.metricsRoute?.metrics;
  await app.register(apiRoutes, {
    projects: deps.projects,
    accept: deps.accept,
    notifications: deps.notifications,
    ...(metrics !== undefined && { onLargeBodies: (inFlight) => (metrics.largeBodyBytes = inFlight) }),
  });
  await adminApi(app, { ...deps, rateLimit: deps.config.adminRateLimit });
  for (const plugin of deps.plugins ?? []) await plugin(app);
  return app;
}

const API_DOCS_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "frame-ancestors 'self'",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
].join('; ');

/**
 * The OpenAPI 3.1 document, generated from the API routes' own schemas (product.md §6), and the
 * reference page at /docs/api, served from the installed swagger-ui files, never from a CDN.
 */
async function registerApiDocs(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Herald API',
        version: '1',
        description:
          'Send email notifications from templates and follow their delivery: those routes take the ' +
          "project's API key as `Authorization: Bearer <key>`. The management API under /api/v1/admin " +
          '(projects, templates, layouts, SMTP, suppressions, webhooks, the delivery log) takes an admin ' +
          'token instead (`hrla_…`, from `herald token create` or the dashboard); neither is accepted in ' +
          "the other's place. This document needs neither.",
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: "The project's API key (`hrl_…`)." },
          adminToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'An admin token (`hrla_…`): `herald token create --name NAME`, or the dashboard.',
          },
        },
      },
    },
    hideUntagged: true,
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs/api',
    staticCSP: true,
    // Scripts only from this server; swagger-ui sets inline styles as it renders. No
    // upgrade-insecure-requests: behind plain HTTP it would break the page's own files.
    transformStaticCSP: () => API_DOCS_CSP,
    // No validator badge: it would send the document to validator.swagger.io.
    uiConfig: { url: OPENAPI, deepLinking: false, tryItOutEnabled: false, validatorUrl: null },
    // Its logo leads back to the dashboard (the plugin puts the image in the top bar's link;
    // BACK_TO_DASHBOARD points that link at the dashboard).
    logo: { type: 'image/svg+xml', content: Buffer.from(LOGO_SVG), href: '/', target: '_self' },
    theme: {
      title: 'Herald API reference',
      js: [{ filename: 'back-to-dashboard.js', content: BACK_TO_DASHBOARD }],
      favicon: [
        {
          filename: 'favicon.svg',
          rel: 'icon',
          sizes: 'any',
          type: 'image/svg+xml',
          content: Buffer.from(MARK_SVG),
        },
      ],
    },
  });
}
