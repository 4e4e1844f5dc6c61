import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { unreadableEncoding } from './read-body.js';

/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1), answered once the route is known instead of at once,
 * as Node does by default: a client that declares a body over the route's limit gets its `413`
 * before it sends a byte of it, not a `100 Continue` and then a `413` in the middle of its upload,
 * which clients report as a broken connection (curl asks for it above 1 MiB, .NET's clients on
 * every POST). A route that may still refuse the body before reading it (a send's body, admitted
 * only while there is room for it: large-bodies.ts) sets `config.continueWhenAdmitted` and calls
 * `sendContinue` itself once it has.
 */

const waiting = new WeakMap<IncomingMessage, ServerResponse>();

export function answerExpectContinue(app: FastifyInstance): void {
  // Handled here, Node leaves the 100 to the listener and emits no 'request': Fastify gets it now.
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    waiting.set(request, response);
    app.server.emit('request', request, response);
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (waiting.has(request.raw) && request.routeOptions.config.continueWhenAdmitted !== true)
      answer(request, { refusesEncoded: false });
    return payload;
  });
}

/**
 * Tells a client that waits for it to send its body, unless the body it declared is over the
 * route's limit or compressed: the route's parser then answers `413` or `415` without reading it.
 * For a route that sets `continueWhenAdmitted`, all of which refuse a compressed body.
 */
export function sendContinue(request: FastifyRequest): void {
  answer(request, { refusesEncoded: true });
}

/** Sends the `100`, unless the route will refuse the body unread (over its limit, or compressed where `refusesEncoded`). */
function answer(request: FastifyRequest, route: { readonly refusesEncoded: boolean }): void {
  const response = waiting.get(request.raw);
  if (response === undefined) return;
  waiting.delete(request.raw);
  const declared = Number(request.headers['content-length']);
  if (declared > (request.routeOptions.bodyLimit ?? Infinity)) return;
  if (route.refusesEncoded && unreadableEncoding(request.headers) !== null) return;
  response.writeContinue();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route sends `100 Continue` itself, once it has admitted the body (expect-continue.ts). */
    continueWhenAdmitted?: boolean;
  }
}
