import { expect } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import type { Storage } from '../../src/storage/storage.js';
import { createTestContext, seedProject, type TestContext } from './services.js';
import { SmtpSink } from './smtp-sink.js';
import { waitUntil } from './wait.js';

/**
 * An in-process API and worker delivering into a sink, with a poll interval of a minute: any
 * message that arrives within the tests' waits was found by a wake or a look at other commits,
 * never by the poll. Claims are counted, and a test may act inside the next one.
 */
export interface WokenWorker {
  readonly sink: SmtpSink;
  readonly ctx: TestContext;
  readonly worker: Worker;
  readonly apiKey: string;
  /** Claims run so far. */
  claims(): number;
  /** Runs `action` inside the next claim, after its query and before it returns. */
  duringNextClaim(action: () => Promise<void>): void;
  /** Sends one message through the in-process API (a 202, or the test fails). */
  send(to: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startWokenWorker(): Promise<WokenWorker> {
  const sink = await new SmtpSink().start();
  const ctx = await createTestContext({
    HERALD_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
    HERALD_DELIVERY_POLL_MS: '60000',
  });
  const apiKey = (await seedProject(ctx.services)).apiKey;
  let claims = 0;
  let during: (() => Promise<void>) | null = null;
  const { storage } = ctx.services;
  const claim = storage.claim.bind(storage);
  storage.claim = (async (queue, request) => {
    const rows = await claim(queue, request);
    if (queue.table !== 'notifications') return rows;
    claims++;
    const action = during;
    during = null;
    await action?.();
    return rows;
  }) as Storage['claim'];
  const worker = createWorker(ctx.services);
  worker.start();
  await waitUntil(() => (claims > 0 ? true : undefined), { what: 'the first claim' });
  return {
    sink,
    ctx,
    worker,
    apiKey,
    claims: () => claims,
    duringNextClaim: (action) => (during = action),
    async send(to) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/v1/notifications',
        headers: { authorization: `Bearer ${apiKey}` },
        payload: { template: 'user_created', to, data: { user_name: 'Jo' } },
      });
      expect(response.statusCode).toBe(202);
    },
    async stop() {
      await worker.stop();
      await ctx.close();
      await sink.stop();
    },
  };
}
