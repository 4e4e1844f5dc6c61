import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { errorCodes } from 'fastify';
import { errors } from '../domain/errors.js';

/**
 * Reads a request body into one buffer. With a Content-Length (what every client sends for a
 * JSON body) the buffer is allocated once at that size and each chunk is copied in as it
 * arrives: a 15 MiB body never becomes one copy of 15 MiB on the event loop at its end (which
 * took up to 100 ms, and twice the memory, with Fastify's own collector), and its buffer is its
 * own, so it moves to a worker thread without another copy. Errors are Fastify's, answered as
 * Fastify answers them (errors.ts): past `limit`, 413; a length that does not match, 400.
 */
export function readBody(payload: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(payload.headers['content-length']);
  if (declared > limit) return Promise.reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  const known = Number.isInteger(declared) && declared >= 0;
  return new Promise((resolve, reject) => {
    // Not from the pool: the buffer must be the body's alone to move to another thread.
    const body = known ? Buffer.allocUnsafeSlow(declared) : null;
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (error: Error | null, result?: Buffer) => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
      if (error === null) resolve(result!);
      else reject(error);
    };
    const onData = (chunk: Buffer) => {
      if (received + chunk.length > limit) return finish(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      if (body !== null) {
        if (received + chunk.length > body.length)
          return finish(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        chunk.copy(body, received);
      } else chunks.push(chunk);
      received += chunk.length;
    };
    const onEnd = () => {
      if (body === null) return finish(null, Buffer.concat(chunks, received));
      if (received !== body.length) return finish(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      finish(null, body);
    };
    const onError = (error: Error & { statusCode?: number }) => {
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
      finish(error);
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  });
}

/**
 * The Content-Encoding of a body Herald would not read (`gzip`, `br`, …), or null: none, only
 * `identity`, or no body at all (a client's usual headers on a call without one).
 */
export function unreadableEncoding(headers: IncomingHttpHeaders): string | null {
  const given = headers['content-encoding'];
  if (given === undefined || !hasBody(headers)) return null;
  const codings = given.split(',').map((coding) => coding.trim().toLowerCase());
  return codings.some((coding) => coding !== '' && coding !== 'identity') ? given : null;
}

/** Whether a request carries a body: chunked, or a length above zero (HTTP/1.1 framing). */
function hasBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && Number(length) > 0;
}

/**
 * Refuses a body sent with a content coding (`Content-Encoding: gzip`): bodies are read as they
 * are sent, and a compressed one would be answered as malformed JSON, which it is not. The coding
 * is named back in printable ASCII, at most 40 characters of it.
 */
export function refuseEncodedBody(request: Pick<IncomingMessage, 'headers'>): void {
  const given = unreadableEncoding(request.headers);
  if (given === null) return;
  const shown = given.replace(/[^\x20-\x7e]/g, '?');
  throw errors.unsupportedEncoding(shown.length > 40 ? `${shown.slice(0, 40)}…` : shown);
}
