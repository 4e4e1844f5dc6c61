import { describe, expect, it } from 'vitest';
import { DEFAULT_LARGE_BODY_LIMITS } from '../../src/http/large-bodies.js';
import { listeningApp, rawConnection, type RawConnection } from '../helpers/raw-http.js';
import { seedProject } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Large request bodies share a budget of bytes in flight per project (and one in all, twice as
 * large), over real sockets: past a project's share its next large body is refused as busy (503,
 * Retry-After) before it is read, another project's is still taken, and a body that could never be
 * taken is refused as too large, not as busy. What is in flight is the metric
 * `herald_http_large_body_bytes`.
 */

const listening = listeningApp({
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 120_000,
  maxConnectionsPerClient: 100,
});

const MiB = 1024 * 1024;

/** A POST of `path` that declares `length` bytes and sends `body` of them (all, some or none). */
async function post(apiKey: string, path: string, length: number, body = ''): Promise<RawConnection> {
  const conn = await rawConnection(listening.port, listening.sockets);
  conn.socket.write(
    `POST ${path} HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer ${apiKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${body}`,
  );
  return conn;
}

/** `herald_http_large_body_bytes`, read from `/metrics` as a scraper reads it. */
async function largeBodyBytes(): Promise<number> {
  const response = await listening.app.inject({ url: '/metrics' });
  const line = /^herald_http_large_body_bytes (\d+)$/m.exec(response.body);
  if (line === null) throw new Error('no herald_http_large_body_bytes in /metrics');
  return Number(line[1]);
}

/** The status line's code, once the answer came. */
const statusOf = (conn: RawConnection) =>
  waitUntil(() => /^HTTP\/1\.1 (\d{3}) /.exec(conn.received)?.[1], { timeoutMs: 20_000, what: 'an answer' });

const BATCH = '/api/v1/notifications/batch';

/** A whole batch of `bytes` that is not JSON: admitted, it is read and gets 400. */
const notJson = (bytes: number) => 'x'.repeat(bytes);

describe('large bodies in flight', () => {
  it('refuses a body larger than the route takes with 413, however large it claims to be', async () => {
    const { apiKey } = await seedProject(listening.ctx.services);
    for (const [path, length] of [
      ['/api/v1/notifications', 99_999_999_999],
      ['/api/v1/notifications', 16 * MiB],
      ['/api/v1/notifications/batch', 99_999_999_999],
      ['/api/v1/notifications/batch', 6 * MiB],
    ] as const) {
      const conn = await post(apiKey, path, length);
      expect(await statusOf(conn), `${path} declaring ${length} bytes`).toBe('413');
      expect(conn.received).toMatch(/"error":"Request body is larger than \d+ MiB"/);
      expect(conn.received).not.toMatch(/retry-after/i);
    }
    // None of them took room: a large body of the same project is still read.
    const large = notJson(DEFAULT_LARGE_BODY_LIMITS.largeFrom + 1);
    expect(await statusOf(await post(apiKey, BATCH, large.length, large))).toBe('400');
  });

  it("answers busy past a project's share, takes another project's, and takes it again once room is back", async () => {
    const { apiKey } = await seedProject(listening.ctx.services);
    // Sends of 15 MiB, then batches of 5 MiB, whose bodies never come: each holds its room until
    // its connection closes. They fill the project's share to less than one more batch.
    const held: RawConnection[] = [];
    let room = DEFAULT_LARGE_BODY_LIMITS.maxBytesPerKey;
    for (const [path, bytes] of [
      ['/api/v1/notifications', 15 * MiB],
      [BATCH, 5 * MiB],
    ] as const) {
      for (; room >= bytes; room -= bytes) held.push(await post(apiKey, path, bytes));
    }
    const probe = notJson(5 * MiB);
    // Every held request has taken its room (the metric says so) before the probe is sent.
    const holding = DEFAULT_LARGE_BODY_LIMITS.maxBytesPerKey - room;
    await waitUntil(async () => ((await largeBodyBytes()) === holding ? true : undefined), {
      timeoutMs: 20_000,
      what: `${holding} bytes of large bodies in flight`,
    });

    const refused = await post(apiKey, BATCH, probe.length, probe);
    expect(await statusOf(refused)).toBe('503');
    // A client that waits for `100 Continue` is told it is busy instead, before it sends a byte.
    const waiting = await rawConnection(listening.port, listening.sockets);
    waiting.socket.write(
      `POST ${BATCH} HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer ${apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${probe.length}\r\nExpect: 100-continue\r\n\r\n`,
    );
    expect(await statusOf(waiting)).toBe('503');
    waiting.socket.destroy();
    expect(refused.received).toMatch(/^Retry-After: 1\r$/im);
    expect(refused.received).toContain('"error":"Too many large requests are being checked; retry shortly"');
    expect(held.map((conn) => conn.received)).toEqual(held.map(() => ''));

    const other = await seedProject(listening.ctx.services);
    expect(await statusOf(await post(other.apiKey, BATCH, probe.length, probe))).toBe('400');

    held.pop()!.socket.destroy();
    await waitUntil(async () => ((await largeBodyBytes()) < holding ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the closed request to give its room back',
    });
    await waitUntil(
      async () => {
        const again = await post(apiKey, BATCH, probe.length, probe);
        const status = await statusOf(again);
        again.socket.destroy();
        return status === '400' ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'room for a large body again' },
    );
    for (const conn of held) conn.socket.destroy();
    await waitUntil(async () => ((await largeBodyBytes()) === 0 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'every large body to give its room back',
    });
  });
});
