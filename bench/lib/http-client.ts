/**
 * A small keep-alive HTTP client on node:http for the bench's own requests (filling the queue,
 * status lookups, the paced end-to-end client). No undici: plain http.Agent sockets.
 */
import { Agent, request } from 'node:http';
import { HOST } from './net.js';

export interface Response {
  status: number;
  body: string;
}

export function keepAliveAgent(maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

export function httpRequest(
  agent: Agent,
  port: number,
  method: 'GET' | 'POST',
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request({ host: HOST, port, method, path, headers, agent, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 30s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Runs task(0) … task(total - 1) with at most `concurrency` in flight. The first error stops
 * new tasks and is rethrown once the tasks in flight have settled.
 */
export async function runPool(
  total: number,
  concurrency: number,
  task: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (failure === undefined && next < total) {
      const index = next;
      next += 1;
      try {
        await task(index);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, lane));
  if (failure !== undefined) throw failure;
}
