/** Loopback networking helpers: free ports, readiness polling, TCP probes. */
import { createServer, connect } from 'node:net';
import { request } from 'node:http';
import type { Tracked } from './processes.js';

export const HOST = '127.0.0.1';

/** A port that was free a moment ago (the OS picks it; a race is possible but harmless here). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** True when something accepts TCP connections on host:port within `timeoutMs`. */
export function tcpAnswers(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

function getStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: HOST, port, path, method: 'GET', agent: false, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

/**
 * Polls GET http://127.0.0.1:port/path until it answers 200. Fails early when `process` exits,
 * and after `timeoutMs` (bounded: at most timeoutMs / 100 attempts).
 */
export async function waitForHttp(
  port: number,
  path: string,
  options: { timeoutMs: number; process?: Tracked },
): Promise<void> {
  const deadline = performance.now() + options.timeoutMs;
  let last = 0;
  while (performance.now() < deadline) {
    if (options.process?.hasExited()) {
      throw new Error(`${options.process.name} exited before ${path} answered 200`);
    }
    last = await getStatus(port, path);
    if (last === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `GET ${path} on port ${port} did not answer 200 within ${options.timeoutMs / 1000}s (last status: ${last || 'no answer'})`,
  );
}
