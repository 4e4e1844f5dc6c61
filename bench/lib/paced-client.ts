/**
 * An open-loop load generator (wrk2 is not available): request i is due at start + i / rate,
 * whatever happened to earlier requests, so a slow server cannot slow the offered load down
 * (no coordinated omission). Requests go over keep-alive sockets of a plain http.Agent; when all
 * sockets are busy the agent queues, and that wait counts in the latency from the due time.
 */
import { httpRequest, keepAliveAgent, type Response } from './http-client.js';

export interface PacedOptions {
  port: number;
  rate: number;
  durationS: number;
  maxSockets: number;
  send: (index: number) => { path: string; headers: Record<string, string>; body: string };
  onCount?: (sent: number, done: number) => void;
}

export interface PacedSample {
  /** Epoch ms at which the request was due. */
  dueAt: number;
  /** ms from due time to the complete response. */
  responseMs: number;
  response: Response | Error;
}

const TICK_MS = 2;

export async function runPaced(options: PacedOptions): Promise<PacedSample[]> {
  const agent = keepAliveAgent(options.maxSockets);
  const total = Math.max(1, Math.round(options.rate * options.durationS));
  const samples: Promise<PacedSample>[] = [];
  const startPerf = performance.now();
  const startEpoch = Date.now();
  let done = 0;

  const fire = (index: number) => {
    const dueOffset = (index * 1000) / options.rate;
    const request = options.send(index);
    const dueAt = startEpoch + dueOffset;
    samples.push(
      httpRequest(agent, options.port, 'POST', request.path, request.headers, request.body)
        .then(
          (response) => response,
          (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
        )
        .then((response) => {
          done += 1;
          return { dueAt, responseMs: performance.now() - startPerf - dueOffset, response };
        }),
    );
  };

  await new Promise<void>((resolve) => {
    let next = 0;
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - startPerf) * options.rate) / 1000) + 1);
      while (next < due) fire(next++);
      options.onCount?.(next, done);
      if (next >= total) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(tick, TICK_MS);
    tick();
  });
  const results = await Promise.all(samples);
  agent.destroy();
  return results;
}
