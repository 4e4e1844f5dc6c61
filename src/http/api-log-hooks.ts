import type { FastifyInstance } from 'fastify';
import { adminTokenPrefix, isWellFormedAdminToken } from '../domain/admin-token.js';
import { apiKeyPrefix, isWellFormedApiKey } from '../domain/api-key.js';
import type { ApiLogService } from '../services/api-log.js';
import type { ProjectRow } from '../storage/schema.js';

/** What the API log records about one request, filled in as the request is handled. */
export interface ApiLogContext {
  keyPrefix: string | null;
  projectId: number | null;
  requestId: string | null;
  error: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiLog: ApiLogContext;
    /** The authenticated project of an API request. */
    project: ProjectRow | null;
    /** How many notifications a send request carries: 1, or a batch's length once it is read. */
    sends: number;
  }
}

const MAX_PATH = 500;

/**
 * What the API log keeps of a bearer token that was not accepted: the part an API key or an admin
 * token shows in lists, and only for a string of one of those shapes (checksum included), so that
 * nothing of a secret sent by mistake (another service's key, an admin token's body) is stored.
 */
export function loggedTokenPrefix(token: string | null): string | null {
  if (token === null) return null;
  if (isWellFormedApiKey(token)) return apiKeyPrefix(token);
  if (isWellFormedAdminToken(token)) return adminTokenPrefix(token);
  return null;
}

/** Every request under /api/v1 is recorded once its response is sent (buffered, off the hot path). */
export function registerApiLog(app: FastifyInstance, apiLogs: ApiLogService): void {
  app.decorateRequest('apiLog', null as unknown as ApiLogContext);
  app.decorateRequest('project', null);
  app.decorateRequest('sends', 1);
  app.addHook('onRequest', async (request) => {
    request.apiLog = { keyPrefix: null, projectId: null, requestId: null, error: null };
    request.sends = 1;
  });
  app.addHook('onResponse', async (request, reply) => {
    const url = request.url;
    if (!url.startsWith('/api/v1')) return;
    const query = url.indexOf('?');
    apiLogs.record({
      created_at: Date.now(),
      method: request.method,
      path: (query === -1 ? url : url.slice(0, query)).slice(0, MAX_PATH),
      status_code: reply.statusCode,
      error: request.apiLog.error,
      latency_ms: Math.round(reply.elapsedTime * 1000) / 1000,
      key_prefix: request.apiLog.keyPrefix,
      project_id: request.apiLog.projectId,
      request_id: request.apiLog.requestId,
    });
  });
}
