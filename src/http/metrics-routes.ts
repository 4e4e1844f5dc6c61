import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken } from '../domain/api-key.js';
import type { Metrics } from '../metrics/metrics.js';
import { secretsMatch } from '../security/token.js';

export interface MetricsRouteOptions {
  readonly metrics: Metrics;
  readonly production: boolean;
  /** HERALD_METRICS_TOKEN. In production the endpoint exists only when it is set. */
  readonly token: string | null;
}

const SEND_PATH = /^\/api\/v1\/notifications(?:\/|\/batch\/?)?$/;

function acceptOutcome(status: number, replayed: boolean): string {
  if (status === 202) return replayed ? 'replayed' : 'accepted';
  if (status === 402) return 'quota_exceeded';
  return status >= 500 ? 'error' : 'rejected';
}

function bearerMatches(request: FastifyRequest, token: string): boolean {
  const given = bearerToken(request.headers.authorization);
  return given !== null && secretsMatch(given, token);
}

/**
 * `GET /metrics` (Prometheus text format) and the hooks that time every request and count send
 * outcomes. The send counter is fed from the response, so the API routes stay unaware of metrics.
 */
export async function metricsRoutes(app: FastifyInstance, options: MetricsRouteOptions): Promise<void> {
  const { metrics } = options;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpDuration.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    const project = request.project;
    if (request.method === 'POST' && project && SEND_PATH.test(request.url.split('?')[0]!)) {
      const replayed = reply.getHeader('idempotent-replayed') === 'true';
      // Counted in notifications: a batch of 500 is 500 accepted (or refused) sends.
      metrics.accepted.inc(
        { project_id: String(project.id), outcome: acceptOutcome(reply.statusCode, replayed) },
        request.sends,
      );
    }
  });
  // In production an unset token means the operator has not opted in: the endpoint does not exist.
  if (options.production && options.token === null) return;
  app.get('/metrics', async (request, reply) => {
    if (options.token !== null && !bearerMatches(request, options.token)) {
      return reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'Unauthorized' });
    }
    const body = await metrics.render();
    return reply.header('content-type', metrics.contentType).header('cache-control', 'no-store').send(body);
  });
}
