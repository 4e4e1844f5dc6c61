import { connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import type { ClientLimits } from '../../src/http/client-limits.js';
import { createTestContext, type TestContext } from './services.js';

/** A raw connection to an HTTP server, with what it has received so far and whether it closed. */
export interface RawConnection {
  readonly socket: Socket;
  readonly received: string;
  readonly closed: boolean;
}

/**
 * Opens a TCP connection to 127.0.0.1:`port` (from `localAddress`, another loopback address to be
 * another client) and records what comes back. The socket is added to `opened`, for the suite to
 * destroy at its end.
 */
export async function rawConnection(
  port: number,
  opened: Socket[],
  localAddress = '127.0.0.1',
): Promise<RawConnection> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  opened.push(socket);
  let received = '';
  let closed = false;
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return {
    socket,
    get received() {
      return received;
    },
    get closed() {
      return closed;
    },
  };
}

/** An HTTP app listening on a loopback port, over a fresh test context (services.ts). */
export interface ListeningApp {
  readonly ctx: TestContext;
  readonly app: FastifyInstance;
  readonly port: number;
  /** Connections opened by the suite (rawConnection), destroyed at its end. */
  readonly sockets: Socket[];
}

/**
 * Registers the suite's set-up and tear-down of an app listening with `clientLimits`, metrics
 * served without a token, configured by `env` beside the test defaults. The returned object is
 * filled in before the suite's first test.
 */
export function listeningApp(clientLimits: ClientLimits, env: Record<string, string> = {}): ListeningApp {
  const listening = { sockets: [] as Socket[] } as { -readonly [K in keyof ListeningApp]: ListeningApp[K] };
  beforeAll(async () => {
    listening.ctx = await createTestContext(env);
    listening.app = await buildApp({
      ...listening.ctx.services,
      clientLimits,
      metricsRoute: { metrics: listening.ctx.services.metrics, production: false, token: null },
    });
    await listening.app.listen({ port: 0, host: '127.0.0.1' });
    listening.port = (listening.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of listening.sockets) socket.destroy();
    await listening.app?.close();
    await listening.ctx?.close();
  });
  return listening;
}
