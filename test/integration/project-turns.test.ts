import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import type { NotificationState } from '../../src/storage/schema.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §8 at the queue: one project's backlog never holds another project's mail back. A
 * project queues hundreds of sends and then deletes their template, so each fails when its turn
 * comes, before any relay (no relay's lane fills, which would leave the project out of claims);
 * another project then queues one. The worker claims the projects' due mail in turns
 * (storage/queue.ts), so that message goes out with the first claim, not after the backlog.
 */

const BATCH_SIZE = 50;
const BACKLOG = 600;
/** Fewer lanes than a claim holds, so the order a claim's mail is started in shows. */
const LANES = 4;

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker | undefined;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_DELIVERY_BATCH_SIZE: String(BATCH_SIZE),
    HERALD_DELIVERY_CONCURRENCY: String(LANES),
    HERALD_DELIVERY_POLL_MS: '20',
  });
});

afterAll(async () => {
  await worker?.stop();
  await ctx.close();
  await sink.stop();
});

async function project(): Promise<{ projectId: number; apiKey: string }> {
  const seeded = await seedProject(ctx.services);
  await ctx.services.smtpSettings.setFromUrl(seeded.projectId, `smtp://127.0.0.1:${sink.port}?security=none`);
  return seeded;
}

async function post(apiKey: string, url: string, payload: unknown): Promise<void> {
  const response = await ctx.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${apiKey}` },
    payload: payload as object,
  });
  expect(response.statusCode, response.body).toBe(202);
}

describe("one project's failing backlog and another project's mail", () => {
  it(
    'sends the other project’s message with the first claim, not after the backlog',
    { timeout: 60_000 },
    async () => {
      const [busy, quiet] = [await project(), await project()];
      for (let start = 0; start < BACKLOG; start += 200)
        await post(
          busy.apiKey,
          '/api/v1/notifications/batch',
          Array.from({ length: 200 }, (_, i) => ({
            template: 'user_created',
            to: `backlog${start + i}@example.org`,
            data: { user_name: 'Jane' },
          })),
        );
      await ctx.services.templates.delete(busy.projectId, 'user_created');
      await post(quiet.apiKey, '/api/v1/notifications', {
        template: 'user_created',
        to: 'quiet@example.org',
        data: { user_name: 'Jane' },
      });

      worker = createWorker(ctx.services);
      worker.start();
      // The moment the other project's message reaches the relay, most of the backlog is queued
      // still: it went out with the first claim (taken second, after the backlog's oldest), where a
      // claim of the oldest due mail first leaves it for the last.
      await sink.waitFor(1, 30_000);
      expect(sink.messages.map((message) => message.envelopeTo)).toEqual([['quiet@example.org']]);
      expect(await count(busy.projectId, 'queued')).toBeGreaterThan(BACKLOG / 2);

      await waitUntil(async () => ((await count(busy.projectId, 'failed')) === BACKLOG ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the backlog failed',
      });
      const failed = await ctx.services.storage.db
        .selectFrom('notifications')
        .select('error_message')
        .where('project_id', '=', busy.projectId)
        .execute();
      for (const row of failed) expect(row.error_message).toBe('Template not found');
    },
  );
});

async function count(projectId: number, state: NotificationState): Promise<number> {
  const row = await ctx.services.storage.db
    .selectFrom('notifications')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('project_id', '=', projectId)
    .where('state', '=', state)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
