import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { listeningApp, rawConnection } from '../helpers/raw-http.js';
import { seedProject } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Slow and greedy HTTP clients, over real sockets: a client that drips its headers or its body is
 * cut off once its time is up (408), and one client cannot hold more than its share of
 * connections, while another client is still served.
 */

const LIMITS = { headersTimeoutMs: 1_500, requestTimeoutMs: 3_000, maxConnectionsPerClient: 10 };
const listening = listeningApp(LIMITS);

/** A raw connection that records what it receives and when it is closed. */
const open = (localAddress?: string) => rawConnection(listening.port, listening.sockets, localAddress);

/** Writes `chunk` every 200 ms until the socket closes. */
function drip(socket: Socket, chunk: string): void {
  const timer = setInterval(() => {
    if (socket.destroyed) clearInterval(timer);
    else socket.write(chunk);
  }, 200);
  socket.once('close', () => clearInterval(timer));
}

/** The JSON body of a raw HTTP answer. */
const bodyOf = (answer: string): unknown => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));

const closedWithin = (conn: { closed: boolean }, what: string) =>
  waitUntil(() => (conn.closed ? true : undefined), { timeoutMs: 20_000, what });

describe('slow HTTP clients', () => {
  it('cuts off a client that drips its headers, with 408', async () => {
    const conn = await open();
    conn.socket.write('GET /healthz HTTP/1.1\r\nHost: herald\r\n');
    drip(conn.socket, 'X-Drip: 1\r\n');
    await closedWithin(conn, 'the header drip to be cut off');
    expect(conn.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(conn.received)).toEqual({ error: 'The request did not arrive in time' });
  });

  it('cuts off a client that drips its body, with 408', async () => {
    const { apiKey } = await seedProject(listening.ctx.services);
    const conn = await open();
    conn.socket.write(
      `POST /api/v1/notifications HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer ${apiKey}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{',
    );
    drip(conn.socket, ' ');
    await closedWithin(conn, 'the body drip to be cut off');
    expect(conn.received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes the connections of a client past its cap at once, and serves another client', async () => {
    const held: Awaited<ReturnType<typeof open>>[] = [];
    for (let i = 0; i < LIMITS.maxConnectionsPerClient; i++) held.push(await open('127.0.0.3'));
    const extra: Awaited<ReturnType<typeof open>>[] = [];
    for (let i = 0; i < 5; i++) extra.push(await open('127.0.0.3'));
    for (const conn of extra) await closedWithin(conn, 'a connection past the cap to be closed');
    expect(extra.map((conn) => conn.received)).toEqual(['', '', '', '', '']);
    expect(held.filter((conn) => conn.closed)).toEqual([]);

    // Another client is served meanwhile, and the refusals are counted.
    const other = await open('127.0.0.4');
    other.socket.write('GET /metrics HTTP/1.1\r\nHost: herald\r\nConnection: close\r\n\r\n');
    await closedWithin(other, 'the other client to be answered');
    expect(other.received).toMatch(/^HTTP\/1\.1 200 /);
    expect(other.received).toMatch(/^herald_http_connections_refused_total 5$/m);

    // Once the first client lets go, it may connect again.
    for (const conn of held) conn.socket.destroy();
    await waitUntil(() => (held.every((conn) => conn.closed) ? true : undefined));
    const again = await open('127.0.0.3');
    again.socket.write('GET /healthz HTTP/1.1\r\nHost: herald\r\nConnection: close\r\n\r\n');
    await closedWithin(again, 'the client to be answered again');
    expect(again.received).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('requests the HTTP parser refuses', () => {
  it("answers headers over Node's limit with 431, in the API's error shape", async () => {
    const conn = await open('127.0.0.5');
    conn.socket.write(`GET /healthz HTTP/1.1\r\nHost: herald\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`);
    await closedWithin(conn, 'the oversized headers to be answered');
    expect(conn.received).toMatch(/^HTTP\/1\.1 431 /);
    expect(conn.received).toMatch(/^Content-Type: application\/json; charset=utf-8\r$/im);
    expect(bodyOf(conn.received)).toEqual({ error: 'Request headers are larger than 16 KiB' });
  });

  it('answers a body with both Content-Length and Transfer-Encoding with 400, naming the fault', async () => {
    const { apiKey } = await seedProject(listening.ctx.services);
    const conn = await open('127.0.0.5');
    conn.socket.write(
      `POST /api/v1/notifications HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer ${apiKey}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    );
    await closedWithin(conn, 'the ambiguous body to be answered');
    expect(conn.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(conn.received)).toEqual({
      error: expect.stringMatching(/^Malformed HTTP request \(HPE_[A-Z_]+\)$/) as unknown,
    });
  });
});
