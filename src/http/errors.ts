import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, HeraldError, Messages } from '../domain/errors.js';

/** The one place that turns domain error codes into HTTP status codes. */
const STATUS: Record<ErrorCode, number> = {
  [ErrorCode.InvalidApiKey]: 401,
  [ErrorCode.InvalidJson]: 400,
  [ErrorCode.InvalidTemplate]: 400,
  [ErrorCode.InvalidType]: 400,
  [ErrorCode.InvalidRecipient]: 400,
  [ErrorCode.InvalidField]: 400,
  [ErrorCode.InvalidInput]: 400,
  [ErrorCode.QuotaExceeded]: 402,
  [ErrorCode.NotificationNotFound]: 404,
  [ErrorCode.ProjectNotFound]: 404,
  [ErrorCode.TemplateNotFound]: 404,
  [ErrorCode.WebhookNotFound]: 404,
  [ErrorCode.DeliveryNotFound]: 404,
  [ErrorCode.AdminNotFound]: 404,
  [ErrorCode.IdempotencyInFlight]: 409,
  [ErrorCode.NotCancelable]: 409,
  [ErrorCode.ProjectExists]: 409,
  [ErrorCode.TemplateExists]: 409,
  [ErrorCode.LayoutNotFound]: 404,
  [ErrorCode.SuppressionNotFound]: 404,
  [ErrorCode.AdminTokenNotFound]: 404,
  [ErrorCode.LayoutExists]: 409,
  [ErrorCode.AdminTokenExists]: 409,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.InvalidAdminToken]: 401,
  [ErrorCode.RateLimited]: 429,
  [ErrorCode.IdempotencyMismatch]: 422,
  [ErrorCode.QueueFailed]: 500,
  [ErrorCode.UnsupportedEncoding]: 415,
};

export function statusOf(error: HeraldError): number {
  return STATUS[error.code];
}

/** Fastify's own request errors, answered in the API's `{"error": …}` shape. */
function frameworkError(
  error: FastifyError,
  request: FastifyRequest,
): { status: number; message: string } | null {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, message: 'Content-Type must be application/json' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, message: bodyTooLarge(request.routeOptions.bodyLimit) };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, message: Messages.invalidJson };
  }
  // A SyntaxError marked 400 is a parser's verdict on the body; any other is Herald's own failure.
  if (error instanceof SyntaxError && error.statusCode === 400)
    return { status: 400, message: Messages.invalidJson };
  return null;
}

/** The 413 message for a body limit: `Request body is larger than 256 KiB` (or `5 MiB`). */
export function bodyTooLarge(bytes: number): string {
  const size = bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;
  return `Request body is larger than ${size}`;
}

export function sendError(reply: FastifyReply, status: number, message: string, hint?: string): FastifyReply {
  // Null only for errors the router raises before any hook ran (see frameworkErrorHandler).
  if (reply.request.apiLog) reply.request.apiLog.error = message;
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(hint === undefined ? { error: message } : { error: message, hint });
}

export function errorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  // A request that matched no route gets the not-found page even when its body could not be read
  // (malformed JSON, too large, another media type): spec §7.1, a wrong path is a 404, not JSON.
  if (request.is404) return notFoundHandler(request, reply);
  if (error instanceof HeraldError) {
    // The caller only learns that it may retry; the operator needs to know why.
    if (error.code === ErrorCode.QueueFailed) request.log.error({ err: error.cause }, 'enqueue failed');
    // The codings the server takes (RFC 9110 §15.5.16): none.
    if (error.code === ErrorCode.UnsupportedEncoding) void reply.header('accept-encoding', 'identity');
    return sendError(reply, statusOf(error), error.message, error.hint);
  }
  const known = frameworkError(error, request);
  if (known !== null) return sendError(reply, known.status, known.message);
  // A client error raised by a plugin (the reference page's static files: a bad path, an
  // unsatisfiable Range or precondition) is the client's, not a server failure.
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500)
    return sendError(reply, error.statusCode, STATUS_CODES[error.statusCode] ?? 'Bad request');
  request.log.error({ err: error }, 'request failed');
  const isSend = request.method === 'POST' && request.routeOptions.url?.startsWith('/api/v1/notifications');
  return sendError(reply, 500, isSend ? Messages.queueFailed : 'Internal server error');
}

function notFoundPage(message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>404 Not Found</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>404 Not Found</h1><p>${message}</p>
</body></html>
`;
}

/** Under /api/v1 the caller is already at the API: it needs the list of routes, not the prefix. */
const API_NOT_FOUND = notFoundPage(
  'There is no such API route. Every route is in the <a href="/docs/api">API reference</a>.',
);
const NOT_FOUND = notFoundPage(
  'There is nothing at this address. The <a href="/">dashboard</a> is at <code>/</code>, the API ' +
    'under <code>/api/v1</code> (<a href="/docs/api">reference</a>).',
);

/** Spec §7.1: a wrong base URL or path gets a not-found page, not JSON. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const page = request.url === '/api/v1' || request.url.startsWith('/api/v1/') ? API_NOT_FOUND : NOT_FOUND;
  return reply.code(404).type('text/html; charset=utf-8').send(page);
}

/**
 * Errors the router raises before a route is chosen, so no hook runs (no auth, no API log): a path
 * whose percent-encoding cannot be decoded. API paths get the JSON error shape, others the page.
 */
export function frameworkErrorHandler(
  _error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  if (request.url.startsWith('/api/')) return sendError(reply, 400, 'Malformed URL');
  return notFoundHandler(request, reply);
}

/** What a request Node's parser refused is answered with, by the parser's code. */
function clientErrorAnswer(code: string | undefined): { status: number; message: string } {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: 'The request did not arrive in time' };
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        message: `Request headers are larger than ${maxHeaderSize % 1024 === 0 ? `${maxHeaderSize / 1024} KiB` : `${maxHeaderSize} bytes`}`,
      };
    default:
      // HPE_UNEXPECTED_CONTENT_LENGTH (both Content-Length and Transfer-Encoding), a bad chunk, …
      return {
        status: 400,
        message: code?.startsWith('HPE_') ? `Malformed HTTP request (${code})` : 'Malformed HTTP request',
      };
  }
}

/**
 * A request Node's HTTP parser refused, or one that did not arrive in time, never reaches Fastify's
 * routes: it is answered here on the socket, in the API's `{"error": …}` shape, and the connection
 * is closed (what is left on it cannot be read as a request).
 */
export function clientErrorHandler(
  this: FastifyInstance,
  error: Error & { code?: string },
  socket: Duplex,
): void {
  // A reset connection has no one to answer (Node's 'clientError').
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  this.log.trace({ err: error }, 'client error');
  // A response already begun on this connection (a request pipelined behind it was malformed)
  // must not have another status line written into it: the connection is only closed.
  const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && answering?.headersSent !== true) {
    const { status, message } = clientErrorAnswer(error.code);
    const body = JSON.stringify({ error: message });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
