import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { errorHandler } from '../../src/http/errors.js';

/**
 * Only a body that cannot be parsed is the request's "Invalid JSON body": a SyntaxError raised by
 * Herald's own code while handling a request (a bad stored value, a broken check) is a 500.
 */
const app = Fastify({ logger: false });
app.setErrorHandler(errorHandler);
app.post('/api/v1/echo', async (request) => request.body);
app.get('/api/v1/broken', async () => JSON.parse('{"stored": '));
afterAll(() => app.close());

describe('errors of Fastify and of Herald', () => {
  it('answers a body that is not JSON with 400', async () => {
    const reply = await app.inject({
      method: 'POST',
      url: '/api/v1/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{"to": ',
    });
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toEqual({ error: 'Invalid JSON body' });
  });

  it("answers a SyntaxError of the handler's own with 500", async () => {
    const reply = await app.inject({ url: '/api/v1/broken' });
    expect(reply.statusCode).toBe(500);
    expect(reply.json()).toEqual({ error: 'Internal server error' });
  });
});
