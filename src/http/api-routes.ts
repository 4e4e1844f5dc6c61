import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { apiKeyPrefix, bearerToken } from '../domain/api-key.js';
import { Messages, errors } from '../domain/errors.js';
import type { QuotaState } from '../domain/quota.js';
import { parseSendRequest } from '../domain/send-request.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH, type NotificationService } from '../services/notifications.js';
import type { ProjectService } from '../services/projects.js';
import type { ProjectRow } from '../storage/schema.js';
import { sendError } from './errors.js';
import { ErrorBody, SendResponse, StatusParams, StatusResponse } from './schemas.js';

export interface ApiDeps {
  readonly projects: ProjectService;
  readonly notifications: NotificationService;
}

const COLLECTION = '/api/v1/notifications';
const ITEM = '/api/v1/notifications/:request_id';
const ALL_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const;

function setQuotaHeaders(reply: FastifyReply, quota: QuotaState | null): void {
  if (quota === null) return;
  reply.header('X-Quota-Limit', quota.limit);
  reply.header('X-Quota-Remaining', quota.remaining);
  reply.header('X-Quota-Reset', quota.reset);
}

function methodNotAllowed(allow: string) {
  return (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('Allow', allow);
    return sendError(reply, 405, `Method ${request.method} is not allowed here; use ${allow}`);
  };
}

/** Spec §5: the key comes only from `Authorization: Bearer`; never from the query or a cookie. */
function authenticate(projects: ProjectService) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const token = bearerToken(request.headers.authorization);
    if (token !== null) request.apiLog.keyPrefix = apiKeyPrefix(token);
    const project = await projects.authenticate(token);
    if (project === null) {
      // RFC 9110 §15.5.2: a 401 names the scheme the client must use.
      reply.header('WWW-Authenticate', 'Bearer realm="herald"');
      return sendError(reply, 401, Messages.invalidApiKey);
    }
    request.project = project;
    request.apiLog.projectId = project.id;
  };
}

function idempotencyKey(request: FastifyRequest): string | undefined {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  const key = Array.isArray(raw) ? raw[0] : raw;
  if (
    key === undefined ||
    key.length === 0 ||
    key.length > MAX_IDEMPOTENCY_KEY_LENGTH ||
    !/^[\x21-\x7e]+$/.test(key)
  ) {
    throw errors.invalidField(
      `Invalid 'Idempotency-Key' header (1–${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters)`,
    );
  }
  return key;
}

export async function apiRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const onRequest = authenticate(deps.projects);
  // Fastify parses text/plain by default; the API takes JSON only (anything else is a 415).
  // This plugin is encapsulated, so the dashboard's own parsers are not affected.
  app.removeContentTypeParser('text/plain');

  // product.md §6: `POST /api/v1/notifications/` is the collection too, not an item with no id.
  for (const url of [COLLECTION, `${COLLECTION}/`])
    api.post(
      url,
      {
        onRequest,
        schema: { response: { 202: SendResponse, '4xx': ErrorBody, '5xx': ErrorBody } },
      },
      async (request, reply) => {
        const project = request.project as ProjectRow;
        const send = parseSendRequest(request.body);
        const key = idempotencyKey(request);
        const outcome = await deps.notifications.accept({
          project,
          request: send,
          idempotency: key === undefined ? undefined : { key, body: request.body },
        });
        switch (outcome.kind) {
          case 'accepted':
            setQuotaHeaders(reply, outcome.quota);
            request.apiLog.requestId = outcome.body.request_id;
            return reply.code(202).send(outcome.body);
          case 'replayed':
            setQuotaHeaders(reply, outcome.quota);
            reply.header('Idempotent-Replayed', 'true');
            request.apiLog.requestId = outcome.body.request_id;
            return reply.code(202).send(outcome.body);
          case 'quota_exceeded':
            setQuotaHeaders(reply, outcome.quota);
            // Seconds until the quota window resets: when a retry can succeed (RFC 9110 §10.2.3).
            if (outcome.quota !== null)
              reply.header('Retry-After', Math.max(1, outcome.quota.reset - Math.floor(Date.now() / 1000)));
            return sendError(reply, 402, Messages.quotaExceeded);
          case 'idempotency_mismatch':
            return sendError(reply, 422, errors.idempotencyMismatch().message);
          case 'idempotency_in_flight':
            return sendError(reply, 409, errors.idempotencyInFlight().message);
        }
      },
    );

  api.get(
    ITEM,
    {
      onRequest,
      schema: { params: StatusParams, response: { 200: StatusResponse, '4xx': ErrorBody } },
    },
    async (request) => {
      request.apiLog.requestId = request.params.request_id.slice(0, 100);
      return deps.notifications.status((request.project as ProjectRow).id, request.params.request_id);
    },
  );

  for (const url of [COLLECTION, `${COLLECTION}/`]) {
    api.route({
      method: ALL_METHODS.filter((m) => m !== 'POST'),
      url,
      handler: methodNotAllowed('POST'),
    });
  }
  api.route({
    method: ALL_METHODS.filter((m) => m !== 'GET' && m !== 'HEAD'),
    url: ITEM,
    handler: methodNotAllowed('GET, HEAD'),
  });
}
