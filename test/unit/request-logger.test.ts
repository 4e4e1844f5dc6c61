import { Writable } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { errorHandler } from '../../src/http/errors.js';
import { requestLogger } from '../../src/http/request-logger.js';
import { createLogger } from '../../src/logger.js';

/**
 * A request's logger is made only when the request logs, and then logs as Fastify's own child
 * would: bound to the request id, with the server logger's redaction.
 */
const lines: Record<string, unknown>[] = [];
const logger = createLogger(
  'info',
  new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  }),
);
const child = vi.spyOn(logger, 'child');

let next = 0;
const app = Fastify({
  loggerInstance: logger as FastifyBaseLogger,
  logController: new LogController({ disableRequestLogging: true }),
  genReqId: () => `req-${++next}`,
  childLoggerFactory: requestLogger,
});
app.setErrorHandler(errorHandler);
app.get('/quiet', async () => ({ ok: true }));
app.get('/broken', async () => {
  throw new Error('stored value unreadable');
});
app.get('/talks', async (request) => {
  request.log.warn({ password: 'hunter2', nested: { pass: 'x' } }, 'talking');
  request.log.child({ step: 'two' }).info('and on');
  return { level: request.log.level };
});
app.get('/warnings-only', { logLevel: 'warn' }, async (request) => {
  request.log.info('below the route level');
  request.log.debug('further below');
  const before = child.mock.calls.length;
  request.log.warn('at the route level');
  return { level: request.log.level, made: child.mock.calls.length - before };
});
afterAll(() => app.close());
beforeAll(async () => {
  await app.ready();
  // Fastify makes children of its own as it starts: only the requests' are counted.
  child.mockClear();
});

describe('requestLogger', () => {
  it('makes no logger for a request that does not log', async () => {
    for (let i = 0; i < 5; i++) expect((await app.inject({ url: '/quiet' })).statusCode).toBe(200);
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it("logs a request's failure with its id", async () => {
    const reply = await app.inject({ url: '/broken' });
    expect(reply.statusCode).toBe(500);
    expect(child).toHaveBeenCalledTimes(1);
    const line = lines.find((l) => l.msg === 'request failed');
    expect(line).toMatchObject({ level: 50, reqId: expect.stringMatching(/^req-\d+$/) });
    expect((line?.err as { message?: string }).message).toBe('stored value unreadable');
  });

  it("drops lines below a route's level without making a logger, and logs those at it", async () => {
    const made = child.mock.calls.length;
    const reply = await app.inject({ url: '/warnings-only' });
    expect(reply.json()).toEqual({ level: 'warn', made: 1 });
    expect(child.mock.calls.length).toBe(made + 1);
    expect(lines.some((l) => l.msg === 'below the route level' || l.msg === 'further below')).toBe(false);
    expect(lines.find((l) => l.msg === 'at the route level')).toMatchObject({
      level: 40,
      reqId: expect.any(String),
    });
  });

  it('keeps the redaction, the level and children of the server logger', async () => {
    const reply = await app.inject({ url: '/talks' });
    expect(reply.json()).toEqual({ level: 'info' });
    const talking = lines.find((l) => l.msg === 'talking');
    expect(talking).toMatchObject({ level: 40, password: '[redacted]', nested: { pass: '[redacted]' } });
    expect(talking?.reqId).toMatch(/^req-\d+$/);
    expect(lines.find((l) => l.msg === 'and on')).toMatchObject({ reqId: talking?.reqId, step: 'two' });
  });
});
