import { createServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { KeysInFlight } from '../../src/http/idempotency-key.js';
import { LargeBodies } from '../../src/http/large-bodies.js';
import { whenResponseClosed } from '../../src/http/response-closed.js';

/**
 * What a request holds (its Idempotency-Key, its large body's room) is let go when its response
 * closes, over real sockets: also when the client went away before the hold was taken, as it can
 * while an earlier hook waits (the key's look-up on PostgreSQL).
 */

/** A response whose client sent its request and then closed the connection, once it has closed. */
async function abandonedResponse(): Promise<{ response: ServerResponse; close(): Promise<void> }> {
  let received: (response: ServerResponse) => void = () => undefined;
  const arrived = new Promise<ServerResponse>((resolve) => (received = resolve));
  const server = createServer((_request, response) => received(response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = httpRequest({
    port: (server.address() as AddressInfo).port,
    host: '127.0.0.1',
    method: 'POST',
    headers: { 'content-length': String(2 * 1024 * 1024) },
  });
  client.on('error', () => undefined);
  client.write('{"template":');
  const response = await arrived;
  const closed = new Promise((resolve) => response.once('close', resolve));
  client.destroy();
  await closed;
  return { response, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const replyOf = (response: ServerResponse) => ({ raw: response }) as unknown as FastifyReply;

describe('a hold taken for a response that has closed already', () => {
  it('runs at once, and once', async () => {
    const { response, close } = await abandonedResponse();
    let runs = 0;
    whenResponseClosed(response, () => runs++);
    expect(runs).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toBe(1);
    await close();
  });

  it('leaves an Idempotency-Key free for the retry', async () => {
    const { response, close } = await abandonedResponse();
    const keys = new KeysInFlight();
    expect(keys.hold(1, 'order-7', replyOf(response))).toBe(true);
    const { response: retry, close: closeRetry } = await abandonedResponse();
    expect(keys.hold(1, 'order-7', replyOf(retry))).toBe(true);
    await close();
    await closeRetry();
  });

  it("gives a large body's room back", async () => {
    const { response, close } = await abandonedResponse();
    const large = new LargeBodies();
    const request = {
      headers: { 'content-length': String(2 * 1024 * 1024) },
      routeOptions: { bodyLimit: 15 * 1024 * 1024 },
    } as unknown as FastifyRequest;
    expect(large.admit(request, replyOf(response), 'project-1')).toBe(true);
    expect(large.inFlight).toBe(0);
    await close();
  });
});
