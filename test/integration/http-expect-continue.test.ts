import { describe, expect, it } from 'vitest';
import { ADMIN } from '../helpers/admin.js';
import { listeningApp, rawConnection, type RawConnection } from '../helpers/raw-http.js';
import { seedProject } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * `Expect: 100-continue` over real sockets (src/http/expect-continue.ts): a body the route would
 * refuse as too large is refused before the client sends it, with no `100 Continue` first; a body
 * the route takes is asked for with `100 Continue`, on the send API, the management API and the
 * dashboard alike.
 */

/** Calls per minute an admin token may make here. */
const ADMIN_RATE_LIMIT = 5;

const listening = listeningApp(
  { headersTimeoutMs: 60_000, requestTimeoutMs: 120_000, maxConnectionsPerClient: 100 },
  { HERALD_ADMIN_RATE_LIMIT: String(ADMIN_RATE_LIMIT) },
);

const MiB = 1024 * 1024;
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';

/** Headers of a request that waits for `100 Continue` before its body of `length` bytes. */
async function expecting(
  method: string,
  path: string,
  token: string,
  length: number,
  type = 'application/json',
  extraHeaders = '',
): Promise<RawConnection> {
  const conn = await rawConnection(listening.port, listening.sockets);
  conn.socket.write(
    `${method} ${path} HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer ${token}\r\n${extraHeaders}` +
      `Content-Type: ${type}\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
  );
  return conn;
}

/** The final answer's status code (a 100 is not one), once it came. */
const finalStatus = (conn: RawConnection) =>
  waitUntil(() => /HTTP\/1\.1 ([2-5]\d\d) /.exec(conn.received)?.[1], {
    timeoutMs: 20_000,
    what: 'an answer',
  });

const asksForBody = (conn: RawConnection) =>
  waitUntil(() => (conn.received.startsWith(CONTINUE) ? true : undefined), {
    timeoutMs: 20_000,
    what: '100 Continue',
  });

describe('Expect: 100-continue', () => {
  it('refuses a send declared too large before its body comes, and asks for one it takes', async () => {
    const { apiKey } = await seedProject(listening.ctx.services);
    const tooLarge = await expecting('POST', '/api/v1/notifications', apiKey, 16 * MiB);
    expect(await finalStatus(tooLarge)).toBe('413');
    expect(tooLarge.received).toMatch(/^HTTP\/1\.1 413 /);
    expect(tooLarge.received).toMatch(/"error":"Request body is larger than \d+ MiB"/);

    const body = JSON.stringify({
      template: 'user_created',
      to: 'jane@example.org',
      data: { user_name: 'J' },
    });
    // A compressed body is refused (415) before it is sent too, on either API.
    const compressed = await expecting(
      'POST',
      '/api/v1/notifications',
      apiKey,
      100,
      undefined,
      'Content-Encoding: gzip\r\n',
    );
    expect(await finalStatus(compressed)).toBe('415');
    expect(compressed.received).toMatch(/^HTTP\/1\.1 415 /);

    const taken = await expecting('POST', '/api/v1/notifications', apiKey, Buffer.byteLength(body));
    await asksForBody(taken);
    taken.socket.write(body);
    expect(await finalStatus(taken)).toBe('202');
  });

  it('does the same on the management API, and answers a wrong key before asking for anything', async () => {
    const { secret } = await listening.ctx.services.adminTokens.create('expect-continue');
    const layout = await expecting('PUT', `${ADMIN}/projects/1/layouts/big`, secret, 3 * MiB);
    expect(await finalStatus(layout)).toBe('413');
    expect(layout.received).toMatch(/^HTTP\/1\.1 413 /);
    const zipped = await expecting(
      'POST',
      `${ADMIN}/projects`,
      secret,
      100,
      undefined,
      'Content-Encoding: br\r\n',
    );
    expect(await finalStatus(zipped)).toBe('415');
    expect(zipped.received).toMatch(/^HTTP\/1\.1 415 /);

    const body = JSON.stringify({ name: 'expecting' });
    const project = await expecting('POST', `${ADMIN}/projects`, secret, Buffer.byteLength(body));
    await asksForBody(project);
    project.socket.write(body);
    expect(await finalStatus(project)).toBe('201');

    const wrongKey = await expecting('POST', '/api/v1/notifications', 'hrl_wrong', 1000);
    expect(await finalStatus(wrongKey)).toBe('401');
    expect(wrongKey.received).toMatch(/^HTTP\/1\.1 401 /);
  });

  it('asks for a compressed body on a route that does not refuse one unread', async () => {
    // Only the two APIs refuse a compressed body before it comes; elsewhere the client is asked
    // for it, not left to wait out its own timeout.
    for (const [path, type] of [
      ['/api/v1/nothing', 'application/json'],
      ['/login', 'application/x-www-form-urlencoded'],
    ] as const) {
      const conn = await expecting('POST', path, 'none', 5, type, 'Content-Encoding: gzip\r\n');
      await asksForBody(conn);
      conn.socket.write('x=1&y');
      expect(Number(await finalStatus(conn))).toBeGreaterThanOrEqual(300);
    }
  });

  it('answers a management call over its rate limit before asking for its body', async () => {
    const { secret } = await listening.ctx.services.adminTokens.create('expect-limited');
    for (let i = 0; i < ADMIN_RATE_LIMIT; i++) {
      const spent = await fetch(`http://127.0.0.1:${listening.port}${ADMIN}/projects`, {
        headers: { authorization: `Bearer ${secret}` },
      });
      expect(spent.status).toBe(200);
      await spent.text();
    }
    const body = JSON.stringify({ name: 'over-the-limit' });
    const limited = await expecting('POST', `${ADMIN}/projects`, secret, Buffer.byteLength(body));
    expect(await finalStatus(limited)).toBe('429');
    expect(limited.received).toMatch(/^HTTP\/1\.1 429 /);
  });
});
