import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { wrongApiHint } from '../domain/admin-token.js';
import { givenCredentials } from './given-credentials.js';
import { apiKeyPrefix, bearerToken } from '../domain/api-key.js';
import { loggedTokenPrefix } from './api-log-hooks.js';
import { HeraldError, Messages, errors } from '../domain/errors.js';
import type { QuotaState } from '../domain/quota.js';
import type { AcceptOutcome, AcceptService } from '../services/accept.js';
import type { NotificationService } from '../services/notifications.js';
import type { ProjectService } from '../services/projects.js';
import type { ProjectRow } from '../storage/schema.js';
import { BodyChecker, BodyCheckerBusy } from './body-checker.js';
import { KeysInFlight, idempotencyHeader, idempotencyKey } from './idempotency-key.js';
import { sendContinue } from './expect-continue.js';
import type { BodyRequest, BodyResult } from './check-body.js';
import { bodyTooLarge, sendError } from './errors.js';
import { LargeBodies } from './large-bodies.js';
import { readBody, refuseEncodedBody } from './read-body.js';
import {
  BatchBody,
  BatchErrorBody,
  BatchResponse,
  ERROR_RESPONSES,
  MAX_BATCH_SIZE,
  SEND_ERRORS,
  errorMeaning,
  QuotaExceededBody,
  SendBody,
  SendHeaders,
  SendResponse,
  StatusParams,
  StatusResponse,
} from './schemas.js';

export interface ApiDeps {
  readonly projects: ProjectService;
  readonly accept: AcceptService;
  readonly notifications: NotificationService;
  /** Told the bytes of large bodies in flight, for the metrics. */
  readonly onLargeBodies?: (inFlight: () => number) => void;
}

const COLLECTION = '/api/v1/notifications';
const ITEM = '/api/v1/notifications/:request_id';
const BATCH = '/api/v1/notifications/batch';
export const OPENAPI = '/api/v1/openapi.json';
/** Product decision: request bodies are bounded at 256 KiB. */
export const BODY_LIMIT = 256 * 1024;
/**
 * product.md §12: a single send carrying files may be up to 15 MiB (10 MiB of files are 13.4 MiB
 * of base64), everything but the files' content still within BODY_LIMIT.
 */
export const SEND_WITH_FILES_BODY_LIMIT = 15 * 1024 * 1024;
/** product.md §6: a batch of 500 sends may carry up to 5 MiB. */
export const BATCH_BODY_LIMIT = 5 * 1024 * 1024;
const ALL_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const;

function setQuotaHeaders(reply: FastifyReply, quota: QuotaState | null): void {
  if (quota === null) return;
  reply.header('X-Quota-Limit', quota.limit);
  reply.header('X-Quota-Remaining', quota.remaining);
  reply.header('X-Quota-Reset', quota.reset);
}

/** Too many large bodies are in flight or waiting: the client may retry in a second. */
function busy(reply: FastifyReply): FastifyReply {
  reply.header('Retry-After', 1);
  return sendError(reply, 503, 'Too many large requests are being checked; retry shortly');
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
    let project: ProjectRow | null = null;
    try {
      project = await projects.authenticate(token);
    } finally {
      // An accepted key is well formed: only a refused one (or a failed lookup) needs the check.
      request.apiLog.keyPrefix = project === null ? loggedTokenPrefix(token) : apiKeyPrefix(token!);
    }
    if (project === null) {
      // RFC 9110 §15.5.2: a 401 names the scheme the client must use.
      reply.header('WWW-Authenticate', 'Bearer realm="herald"');
      return sendError(
        reply,
        401,
        Messages.invalidApiKey,
        wrongApiHint(givenCredentials(request), token, 'notifications'),
      );
    }
    request.project = project;
    request.apiLog.projectId = project.id;
  };
}

/** Answers an accept's outcome: the 202 with its body, or the refusal (spec §4.1, product.md §2). */
function replyToAccept<Body>(
  reply: FastifyReply,
  sends: number,
  outcome: AcceptOutcome<Body>,
  firstRequestId: (body: Body) => string | undefined,
): FastifyReply {
  switch (outcome.kind) {
    case 'accepted':
    case 'replayed':
      setQuotaHeaders(reply, outcome.quota);
      if (outcome.kind === 'replayed') reply.header('Idempotent-Replayed', 'true');
      reply.request.apiLog.requestId = firstRequestId(outcome.body) ?? null;
      return reply.code(202).send(outcome.body);
    case 'quota_exceeded':
      setQuotaHeaders(reply, outcome.quota);
      // Seconds until the quota window resets: when a retry can succeed (RFC 9110 §10.2.3). A
      // batch larger than the whole quota never can, so it gets no Retry-After.
      if (sends <= outcome.quota.limit)
        reply.header('Retry-After', Math.max(1, outcome.quota.reset - Math.floor(Date.now() / 1000)));
      return sendError(reply, 402, Messages.quotaExceeded);
    case 'idempotency_mismatch':
      return sendError(reply, 422, errors.idempotencyMismatch().message);
    case 'idempotency_in_flight':
      return sendError(reply, 409, errors.idempotencyInFlight().message);
  }
}

/** A single send over BODY_LIMIT once its files' content is left out. */
class BodyTooLarge extends Error {}

/** A send route's body as it arrived: checked in the handler, where the project is known. */
class RawBody {
  constructor(readonly bytes: Buffer) {}
}

const NO_BODY = Buffer.alloc(0);

const SEND_ROUTES = new Set([COLLECTION, `${COLLECTION}/`, BATCH, `${BATCH}/`]);

/** Throws what a refused body is answered with; returns the checked sends otherwise. */
function acceptedBody(result: BodyResult): Extract<BodyResult, { kind: 'ok' | 'problems' }> {
  if (result.kind === 'invalid_json') throw errors.invalidJson(result.hint);
  if (result.kind === 'too_large') throw new BodyTooLarge();
  if (result.kind === 'refused')
    throw new HeraldError(
      result.code,
      result.message,
      result.hint === undefined ? {} : { hint: result.hint },
    );
  return result;
}

/**
 * Request bodies and headers are checked in the handlers (`parseSendRequest`, `idempotencyKey`),
 * in the specification's order and with its error strings; their schemas on the routes describe
 * them for the OpenAPI document and are not compiled into a second, differently worded check.
 */
const CHECKED_IN_HANDLER = () => () => true;

const TAGS = ['notifications'];
const SECURITY = [{ apiKey: [] }];
/** What the item routes (status and cancel) share in the document. */
const ITEM_SCHEMA = { tags: TAGS, security: SECURITY, params: StatusParams } as const;
const ITEM_NOT_FOUND = errorMeaning('Notification not found (or another project’s).');

export async function apiRoutes(app: FastifyInstance, deps: ApiDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  api.setValidatorCompiler(CHECKED_IN_HANDLER);
  const onRequest = authenticate(deps.projects);
  // Fastify parses text/plain by default; the API takes JSON only (anything else is a 415).
  // This plugin is encapsulated, so the dashboard's own parsers are not affected.
  app.removeContentTypeParser('text/plain');
  // A GET or DELETE carries no body, but clients often send their usual JSON Content-Type with it;
  // an empty body there is no body, not malformed JSON. Bodies are read by readBody (one buffer,
  // filled as it arrives) and parsed by the BodyChecker (a large one off the event loop, refusing
  // __proto__ keys as Fastify's parser does). A send route's body is checked in its handler,
  // where the project is known; any other body is only checked to be JSON.
  const bodies = new BodyChecker();
  app.addHook('onClose', () => bodies.close());
  const large = new LargeBodies();
  deps.onLargeBodies?.(() => large.inFlight);
  const keys = new KeysInFlight();
  /**
   * Before a send's body is read: its Idempotency-Key held (a header that is not one is refused
   * by the handler, in the specification's order), and a large body only while there is room for
   * it (large-bodies.ts).
   */
  const preParsing = async (request: FastifyRequest, reply: FastifyReply) => {
    const projectId = (request.project as ProjectRow).id;
    const key = idempotencyHeader(request);
    // Answered here, the body is never read; a hook's return value would be taken for a new body.
    if (typeof key === 'string' && !keys.hold(projectId, key, reply))
      sendError(reply, 409, errors.idempotencyInFlight().message);
    else if (!large.admit(request, reply, String(projectId))) busy(reply);
    else sendContinue(request);
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', async (request: FastifyRequest, payload: IncomingMessage) => {
    refuseEncodedBody(request);
    const body = await readBody(payload, request.routeOptions.bodyLimit ?? BODY_LIMIT);
    if (body.length === 0 && request.method !== 'POST') return undefined;
    if (request.method === 'POST' && SEND_ROUTES.has(request.routeOptions.url ?? ''))
      return new RawBody(body);
    acceptedBody(await bodies.check({ kind: 'json' }, body, 'other'));
    return undefined;
  });
  const check = async (
    request: FastifyRequest,
    reply: FastifyReply,
    kind: 'send' | 'batch',
  ): Promise<Extract<BodyResult, { kind: 'ok' | 'problems' }> | null> => {
    const project = request.project as ProjectRow;
    const job: BodyRequest = {
      kind,
      now: Date.now(),
      defaultRecipient: Boolean(project.contact_email),
      fingerprint: request.headers['idempotency-key'] !== undefined,
      maxItems: MAX_BATCH_SIZE,
      maxItemBytes: BODY_LIMIT,
      tooLarge: bodyTooLarge(BODY_LIMIT),
      maxBytesBesideFiles: BODY_LIMIT,
    };
    // A POST with neither a body nor a Content-Type reaches no parser: no body is not JSON either.
    const bytes = request.body instanceof RawBody ? request.body.bytes : NO_BODY;
    try {
      return acceptedBody(await bodies.check(job, bytes, String(project.id)));
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        sendError(reply, 413, bodyTooLarge(BODY_LIMIT));
        return null;
      }
      if (!(error instanceof BodyCheckerBusy)) throw error;
      busy(reply);
      return null;
    }
  };
  const idempotency = (request: FastifyRequest, fingerprint: string | null) => {
    const key = idempotencyKey(request);
    return key === undefined ? undefined : { key, body: undefined, fingerprint: fingerprint ?? undefined };
  };

  /**
   * The options of a send route: its body read and checked by this file's hooks, under the key's
   * authentication; the copy of `path` with a trailing slash works alike but is left out of the
   * document.
   */
  const sendRoute = <Body, Accepted, Invalid>(
    url: string,
    path: string,
    bodyLimit: number,
    schema: {
      operationId: string;
      summary: string;
      body: Body;
      response: { 202: Accepted; 400: Invalid };
    },
  ) => ({
    onRequest,
    preParsing,
    bodyLimit,
    config: { continueWhenAdmitted: true },
    schema: {
      operationId: url === path ? schema.operationId : undefined,
      hide: url !== path,
      summary: schema.summary,
      tags: TAGS,
      security: SECURITY,
      headers: SendHeaders,
      body: schema.body,
      response: { ...schema.response, 402: QuotaExceededBody, ...SEND_ERRORS, ...ERROR_RESPONSES },
    },
  });

  // product.md §6: `POST /api/v1/notifications/` is the collection too, not an item with no id.
  for (const url of [COLLECTION, `${COLLECTION}/`])
    api.post(
      url,
      sendRoute(url, COLLECTION, SEND_WITH_FILES_BODY_LIMIT, {
        operationId: 'sendNotification',
        summary: 'Send one notification',
        body: SendBody,
        response: { 202: SendResponse, 400: errorMeaning('The request is invalid; nothing was queued.') },
      }),
      async (request, reply) => {
        const project = request.project as ProjectRow;
        const checked = await check(request, reply, 'send');
        if (checked === null) return reply;
        if (checked.kind !== 'ok') throw new Error('a single send has no item problems');
        const outcome = await deps.accept.accept({
          project,
          sends: checked.sends[0]!,
          idempotency: idempotency(request, checked.fingerprint),
        });
        return replyToAccept(reply, 1, outcome, (body) => body.request_id);
      },
    );

  for (const url of [BATCH, `${BATCH}/`])
    api.post(
      url,
      sendRoute(url, BATCH, BATCH_BODY_LIMIT, {
        operationId: 'sendNotificationBatch',
        summary: `Send 1–${MAX_BATCH_SIZE} notifications, all or none`,
        body: BatchBody,
        response: { 202: BatchResponse, 400: BatchErrorBody },
      }),
      async (request, reply) => {
        const project = request.project as ProjectRow;
        const batch = await check(request, reply, 'batch');
        if (batch === null) return reply;
        request.sends = batch.items;
        if (batch.kind === 'problems') {
          const first = batch.problems[0]!;
          const error = `${first.error} (item ${first.index})`;
          request.apiLog.error = error;
          return reply.code(400).send({ error, errors: [...batch.problems] });
        }
        const sends = batch.sends;
        const outcome = await deps.accept.accept({
          project,
          sends,
          idempotency: idempotency(request, batch.fingerprint),
        });
        return replyToAccept(reply, sends.length, outcome, (body) => body.notifications[0]?.request_id);
      },
    );

  api.get(
    ITEM,
    {
      onRequest,
      schema: {
        operationId: 'getNotification',
        summary: "A notification's status",
        ...ITEM_SCHEMA,
        response: { 200: StatusResponse, 404: ITEM_NOT_FOUND, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      request.apiLog.requestId = request.params.request_id.slice(0, 100);
      return deps.notifications.status((request.project as ProjectRow).id, request.params.request_id);
    },
  );

  api.delete(
    ITEM,
    {
      onRequest,
      schema: {
        operationId: 'cancelNotification',
        summary: 'Cancel a queued notification',
        description: 'Only while it is queued and not being sent; it becomes `failed` with `Canceled`.',
        ...ITEM_SCHEMA,
        response: {
          200: StatusResponse,
          404: ITEM_NOT_FOUND,
          409: errorMeaning('Notification can no longer be canceled: it is being sent, sent or failed.'),
          ...ERROR_RESPONSES,
        },
      },
    },
    async (request) => {
      request.apiLog.requestId = request.params.request_id.slice(0, 100);
      return deps.notifications.cancel(request.params.request_id, (request.project as ProjectRow).id);
    },
  );

  api.get(OPENAPI, { schema: { hide: true } }, async (_request, reply) => {
    return reply.type('application/json; charset=utf-8').send(app.swagger());
  });

  for (const url of [COLLECTION, `${COLLECTION}/`, BATCH, `${BATCH}/`]) {
    api.route({
      method: ALL_METHODS.filter((m) => m !== 'POST'),
      url,
      handler: methodNotAllowed('POST'),
    });
  }
  api.route({
    method: ALL_METHODS.filter((m) => m !== 'GET' && m !== 'HEAD' && m !== 'DELETE'),
    url: ITEM,
    handler: methodNotAllowed('GET, HEAD, DELETE'),
  });
}
