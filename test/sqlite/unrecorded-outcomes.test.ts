import type BetterSqlite3Types from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lanePolicy } from '../../src/domain/lanes.js';
import { createWorker, type Worker } from '../../src/roles.js';
import { SqliteDatabase as BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A worker frees a lane as soon as the relay has answered and stores the outcome with the next
 * group commit. While the store does not take those outcomes (here another connection holds
 * SQLite's write lock; a lost database or a full disk alike), it must not go on sending the mail
 * it has claimed: each such message would be sent again after a crash. With four lanes, no mail
 * starts while four outcomes wait, so fewer than eight are sent and not recorded.
 */

const CONCURRENCY = 4;
const HELD = 'held@example.org';

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;
let other: BetterSqlite3Types.Database;
let apiKey: string;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
    HERALD_DELIVERY_CONCURRENCY: String(CONCURRENCY),
  });
  if (ctx.config.database.kind !== 'sqlite') throw new Error('this suite runs on SQLite');
  other = new BetterSqlite3(ctx.config.database.file);
  ({ apiKey } = await seedProject(ctx.services));
  worker = createWorker(ctx.services);
  worker.start();
});
afterAll(async () => {
  if (other?.inTransaction) other.exec('ROLLBACK');
  other?.close();
  await worker?.stop();
  await ctx?.close();
  await sink?.stop();
});

describe('a worker whose outcomes the store does not take', () => {
  it('stops sending once as many outcomes wait as it has lanes, and sends each message once', async () => {
    sink.holdRecipient(HELD);
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications/batch',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: Array.from({ length: 30 }, () => ({
        template: 'user_created',
        to: HELD,
        data: { user_name: 'Jo' },
      })),
    });
    expect(response.statusCode).toBe(202);
    const { notifications } = response.json() as { notifications: { request_id: string }[] };
    const requestIds = notifications.map((sent) => sent.request_id);
    // Every lane one relay may use holds a transaction there; the rest of the batch is claimed.
    const { perRelay } = lanePolicy(ctx.config.delivery);
    await waitUntil(() => (sink.heldFor(HELD) === perRelay ? true : undefined), {
      what: 'a transaction in each lane',
    });
    other.exec('BEGIN IMMEDIATE');
    sink.releaseRecipient(HELD);
    // The relay answers at once from now on; what arrives while the lock is held was sent with
    // its outcome unstored. Half a second is many times what the rest of the batch takes.
    await waitUntil(() => (sink.messages.length >= perRelay ? true : undefined), {
      what: 'the held transactions at the relay',
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const sentUnrecorded = sink.messages.length;
    other.exec('COMMIT');
    expect(sentUnrecorded).toBeLessThan(2 * CONCURRENCY);

    await waitUntil(() => (sink.messages.length >= requestIds.length ? true : undefined), {
      timeoutMs: 20_000,
      what: () => `the whole batch at the relay (${sink.messages.length} there)`,
    });
    const project = await ctx.services.projects.authenticate(apiKey);
    await waitUntil(
      async () => {
        const statuses = await Promise.all(
          requestIds.map((id) => ctx.services.notifications.status(project!.id, id)),
        );
        return statuses.every((status) => status.status === 'sent') ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'every outcome stored' },
    );
    const delivered = sink.messages.map((message) => message.parsed.headers.get('x-herald-request-id'));
    expect([...delivered].sort()).toEqual([...requestIds].sort());
  });
});
