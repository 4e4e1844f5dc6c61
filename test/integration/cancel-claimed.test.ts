import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Messages } from '../../src/domain/errors.js';
import { createLogger } from '../../src/logger.js';
import { createWorker, type Worker } from '../../src/roles.js';
import { NotificationService } from '../../src/services/notifications.js';
import { Signal } from '../../src/services/signal.js';
import { cancelClaimed, cancelRequestsFor, requestCancel } from '../../src/storage/cancel-requests.js';
import { claimPostgres } from '../../src/storage/postgres/claim.js';
import { claimWith } from '../../src/storage/claim.js';
import { NOTIFICATION_QUEUE, releaseClaims } from '../../src/storage/queue.js';
import { claimSqlite } from '../../src/storage/sqlite/claim.js';
import { bearer, expectError, sendOk, statusOf } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §6: a message may be canceled while it is queued and not in an SMTP transaction. A
 * worker claims mail ahead of its lanes, so a message can be claimed and still wait (in the
 * backlog, or parked behind a relay with no room): its cancel is answered by that worker.
 */

const DAY = 86_400_000;

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;
let apiKey: string;
let projectId: number;

const baseEnv = () => ({
  HERALD_SMTP_URL: sink.url,
  // The worker answers a cancel when it is woken, not at its poll.
  HERALD_DELIVERY_POLL_MS: '60000',
  HERALD_SMTP_TIMEOUT_MS: '20000',
});

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext(baseEnv());
  worker = createWorker(ctx.services);
  ctx.services.accept.onAccepted(() => worker.wake());
  worker.start();
  ({ apiKey, projectId } = await seedProject(ctx.services));
});
afterAll(async () => {
  sink.release();
  await worker.stop();
  await ctx.close();
  await sink.stop();
});

function cancel(requestId: string) {
  return ctx.app.inject({
    method: 'DELETE',
    url: `/api/v1/notifications/${requestId}`,
    headers: bearer(apiKey),
  });
}

function delivered(requestId: string): number {
  return sink.messages.filter((m) => m.parsed.headers.get('x-herald-request-id') === requestId).length;
}

async function row(requestId: string) {
  return ctx.services.storage.db
    .selectFrom('notifications')
    .selectAll()
    .where('request_id', '=', requestId)
    .executeTakeFirstOrThrow();
}

const body = (extra: Record<string, unknown> = {}) => ({
  template: 'user_created',
  to: 'jane@example.org',
  data: { user_name: 'Jane' },
  ...extra,
});

/**
 * Starts the worker again with a log the test reads (what it lets go of a deleted project is seen
 * nowhere else: the rows went with the project); returns the log's lines.
 */
async function restartLogged(): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  await worker.stop();
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  worker = createWorker({ ...ctx.services, logger });
  worker.start();
  return lines;
}

/**
 * Sends three messages while the relay holds the first transaction, and returns them once the
 * worker has claimed the second (it waits for a lane: parked behind the relay, or in the backlog).
 */
async function twoWaitingBehindOne(): Promise<[string, string, string]> {
  sink.hold();
  const first = (await sendOk(ctx.app, apiKey, body())).request_id;
  await waitUntil(() => (sink.waiting === 1 ? true : undefined), { what: 'the first transaction to start' });
  const second = (await sendOk(ctx.app, apiKey, body())).request_id;
  const third = (await sendOk(ctx.app, apiKey, body())).request_id;
  await waitUntil(async () => ((await row(second)).state === 'sending' ? true : undefined), {
    what: 'the worker to claim the second',
  });
  return [first, second, third];
}

describe.each([
  ['parked behind a relay with no room', { HERALD_SMTP_MAX_CONNECTIONS: '1' }],
  ['in the backlog, every lane taken', { HERALD_DELIVERY_CONCURRENCY: '1' }],
])('cancel of a message claimed and waiting %s', (_where, env) => {
  beforeAll(async () => {
    await worker.stop();
    await ctx.close();
    ctx = await createTestContext({ ...baseEnv(), ...env });
    worker = createWorker(ctx.services);
    ctx.services.accept.onAccepted(() => worker.wake());
    worker.start();
    ({ apiKey, projectId } = await seedProject(ctx.services));
  });

  it('cancels it before its transaction; refuses the one in its SMTP transaction', async () => {
    const [first, second, third] = await twoWaitingBehindOne();
    const canceled = await cancel(second);
    expect(canceled.statusCode, canceled.body).toBe(200);
    expect(canceled.json()).toMatchObject({
      request_id: second,
      status: 'failed',
      error_message: 'Canceled',
      attempts: 0,
    });
    expectError(await cancel(first), 409, Messages.notCancelable);
    // The refusal is the worker's answer: no request is left waiting.
    expect((await row(first)).cancel_request).toBeNull();
    expect(await row(second)).toMatchObject({ state: 'failed', lease_owner: null, cancel_request: null });

    sink.release();
    for (const id of [first, third])
      await waitUntil(
        async () => ((await statusOf(ctx.app, apiKey, id)).status === 'sent' ? true : undefined),
        {
          what: `${id} to be sent`,
        },
      );
    expect(delivered(first)).toBe(1);
    expect(delivered(second)).toBe(0);
    expect(delivered(third)).toBe(1);
    expect((await ctx.services.notifications.detail(second)).attempts).toEqual([]);
    expect(await statusOf(ctx.app, apiKey, second)).toMatchObject({
      status: 'failed',
      error_message: 'Canceled',
    });
    expectError(await cancel(second), 409, Messages.notCancelable);
  });

  it('a project deleted with force takes its claimed mail that waits: never sent', async () => {
    const lines = await restartLogged();
    const [first, second, third] = await twoWaitingBehindOne();
    const other = await seedProject(ctx.services);
    try {
      // The second is claimed and waits; the third too, unless its relay's line was full.
      const claimed = (await Promise.all([second, third].map(row))).filter((r) => r.state === 'sending');
      await ctx.services.projects.delete(projectId, { force: true });
      const dropped = () =>
        lines
          .filter((line) => line.msg === 'mail of a deleted project dropped before it was sent')
          .reduce((sum, line) => sum + Number(line.messages), 0);
      await waitUntil(() => (dropped() >= claimed.length ? true : undefined), {
        what: () => `the worker to drop the ${claimed.length} claimed messages (dropped ${dropped()})`,
      });
      sink.release();
      // Mail of another project, claimed after the dropped mail, goes out: the lanes go on.
      const next = (await sendOk(ctx.app, other.apiKey, body())).request_id;
      await waitUntil(() => (delivered(next) === 1 ? true : undefined), { what: 'the other project’s mail' });
      // Its transaction had begun before the delete: it may be delivered, as documented.
      expect(delivered(first)).toBe(1);
      expect(delivered(second) + delivered(third)).toBe(0);
    } finally {
      sink.release();
      ({ apiKey, projectId } = other);
    }
  });
});

describe('cancel of a claimed message', () => {
  it('cancels a claimed message whose lane is still loading its template, once loaded', async () => {
    const loader = ctx.services.loader;
    const batchOf = loader.batch.bind(loader);
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    loader.batch = () => {
      const batch = batchOf();
      const load = batch.load.bind(batch);
      batch.load = async (...args) => {
        await gate;
        return load(...args);
      };
      return batch;
    };
    try {
      const { request_id } = await sendOk(ctx.app, apiKey, body());
      // A lane loads it (white-box, as below: nothing in the store shows it); claimed, it may
      // first wait for the lane while the outcome before it is stored.
      const { cancels } = worker.mail as unknown as {
        cancels: { onLoad: Set<unknown>; loadingJobs: ReadonlySet<unknown> };
      };
      await waitUntil(() => (cancels.loadingJobs.size === 1 ? true : undefined), {
        what: 'a lane to load it',
      });
      const answer = cancel(request_id);
      // The worker has taken the request for the loading lane.
      await waitUntil(() => (cancels.onLoad.size === 1 ? true : undefined), {
        what: 'the worker to take the cancel',
      });
      open();
      const canceled = await answer;
      expect(canceled.statusCode, canceled.body).toBe(200);
      expect(canceled.json()).toMatchObject({ status: 'failed', error_message: 'Canceled', attempts: 0 });
      const { request_id: later } = await sendOk(ctx.app, apiKey, body());
      await waitUntil(
        async () => ((await statusOf(ctx.app, apiKey, later)).status === 'sent' ? true : undefined),
        {
          what: 'a later message to be sent',
        },
      );
      expect(delivered(request_id)).toBe(0);
    } finally {
      open();
      loader.batch = batchOf;
    }
  });

  it('lets go of mail still loading when its project is deleted with force: never sent', async () => {
    const lines = await restartLogged();
    const loader = ctx.services.loader;
    const batchOf = loader.batch.bind(loader);
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    let loading = 0;
    loader.batch = () => {
      const batch = batchOf();
      const load = batch.load.bind(batch);
      batch.load = async (...args) => {
        loading++;
        await gate;
        return load(...args);
      };
      return batch;
    };
    const other = await seedProject(ctx.services);
    try {
      const { request_id } = await sendOk(ctx.app, apiKey, body());
      await waitUntil(() => (loading === 1 ? true : undefined), { what: 'the worker to load it' });
      await ctx.services.projects.delete(projectId, { force: true });
      // The worker has looked while it loads (white-box: nothing in the store shows it).
      const { deletedProjects } = worker.mail as unknown as { deletedProjects: { has(id: number): boolean } };
      await waitUntil(() => (deletedProjects.has(projectId) ? true : undefined), {
        what: 'the worker to find the project deleted',
      });
      // Let go once loaded, before any relay is chosen.
      open();
      await waitUntil(
        () => lines.find((line) => line.msg === 'mail of a deleted project dropped before it was sent'),
        { what: 'the worker to let the loading mail go' },
      );
      loader.batch = batchOf;
      const next = (await sendOk(ctx.app, other.apiKey, body())).request_id;
      await waitUntil(() => (delivered(next) === 1 ? true : undefined), { what: 'the other project’s mail' });
      expect(delivered(request_id)).toBe(0);
    } finally {
      open();
      loader.batch = batchOf;
      ({ apiKey, projectId } = other);
    }
  });

  it('finds the mail of a stopping worker given back at once, and cancels it', async () => {
    sink.hold();
    const [first, second, third] = await twoWaitingBehindOne();
    // The stop waits for the held transaction; the mail not begun goes back to the queue first.
    const stopped = worker.stop();
    await waitUntil(async () => ((await row(second)).state === 'queued' ? true : undefined), {
      what: 'the stopping worker to give the waiting mail back',
    });
    const canceled = await cancel(second);
    expect(canceled.statusCode, canceled.body).toBe(200);
    sink.release();
    await stopped;
    worker = createWorker(ctx.services);
    ctx.services.accept.onAccepted(() => worker.wake());
    worker.start();
    // The rest goes out with the next worker: nothing of this test is left queued for the next.
    for (const id of [first, third])
      await waitUntil(
        async () => ((await statusOf(ctx.app, apiKey, id)).status === 'sent' ? true : undefined),
        { what: `${id} to be sent` },
      );
    expect(delivered(second)).toBe(0);
  });

  it('voids a request of an earlier claim when the message is claimed again', async () => {
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    const claim = {
      now: Date.now() + 2 * DAY,
      owner: 'gone-worker',
      leaseUntil: Date.now() + DAY,
      limit: 1,
    };
    const [claimed] = await ctx.services.storage.claim(NOTIFICATION_QUEUE, claim);
    // Its canceler died before an answer; the claim is given back uncounted, and taken again.
    expect(await requestCancel(ctx.services.storage.db, claimed!)).toBe(true);
    await releaseClaims(
      ctx.services.storage.db,
      NOTIFICATION_QUEUE,
      [claimed!.id],
      'gone-worker',
      Date.now(),
    );
    const [again] = await ctx.services.storage.claim(NOTIFICATION_QUEUE, { ...claim, owner: 'next-worker' });
    expect(again).toMatchObject({ request_id, attempts: claimed!.attempts, cancel_request: null });
    expect(await cancelRequestsFor(ctx.services.storage.db, 'next-worker')).toEqual([]);
  });

  it('asks again when its message is given back and claimed by another worker meanwhile', async () => {
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    const claim = { now: Date.now() + 2 * DAY, leaseUntil: Date.now() + DAY, limit: 1 };
    const db = ctx.services.storage.db;
    await ctx.services.storage.claim(NOTIFICATION_QUEUE, { ...claim, owner: 'stopping-worker' });
    const claimStatement = ctx.services.storage.kind === 'postgres' ? claimPostgres : claimSqlite;
    let wakes = 0;
    const service = new NotificationService(
      db,
      {
        webhooksQueued: new Signal(),
        wakeWorkers: () => {
          wakes++;
          void (async () => {
            const [held] = await db
              .selectFrom('notifications')
              .selectAll()
              .where('request_id', '=', request_id)
              .execute();
            if (wakes === 1) {
              // The first holder stops and gives the message back uncounted; another worker,
              // with a lane of its own busy, claims it at once: the same attempt count. One
              // transaction, so the canceler never sees it queued between the two (it would cancel
              // it there itself, without asking again).
              await db.transaction().execute(async (tx) => {
                await releaseClaims(tx, NOTIFICATION_QUEUE, [held!.id], 'stopping-worker', Date.now());
                await claimWith(tx, claimStatement, NOTIFICATION_QUEUE, { ...claim, owner: 'other-worker' });
              });
            } else {
              // The new holder answers the request made about its own claim.
              await db.transaction().execute((tx) => cancelClaimed(tx, held!, 'other-worker', Date.now()));
            }
          })();
        },
      },
      Date.now,
      5_000,
    );
    expect(await service.cancel(request_id, projectId)).toMatchObject({
      status: 'failed',
      error_message: 'Canceled',
    });
    expect(wakes).toBe(2);
  });

  it('takes its request back when no worker answers in time, and refuses: the message goes on', async () => {
    // Claimed by a worker that never answers (hung): due tomorrow, so the live worker leaves it.
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    const claimed = await ctx.services.storage.claim(NOTIFICATION_QUEUE, {
      now: Date.now() + 2 * DAY,
      owner: 'hung-worker',
      leaseUntil: Date.now() + DAY,
      limit: 1,
    });
    expect(claimed.map((r) => r.request_id)).toEqual([request_id]);
    const woken: string[] = [];
    const service = new NotificationService(
      ctx.services.storage.db,
      { webhooksQueued: new Signal(), wakeWorkers: () => woken.push('wake') },
      Date.now,
      300,
    );
    await expect(service.cancel(request_id, projectId)).rejects.toMatchObject({
      message: Messages.notCancelable,
      hint: 'The worker that claimed it did not answer within 0.3 s, so it goes on as claimed; a cancel may still succeed if it returns to the queue',
    });
    expect(woken).toEqual(['wake']);
    // Withdrawn: the hung worker, answering late, finds nothing to cancel.
    expect(await row(request_id)).toMatchObject({
      state: 'sending',
      lease_owner: 'hung-worker',
      cancel_request: null,
    });
  });

  it('cancels a claimed message given back to the queue while it waited', async () => {
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    await ctx.services.storage.claim(NOTIFICATION_QUEUE, {
      now: Date.now() + 2 * DAY,
      owner: 'stopping-worker',
      leaseUntil: Date.now() + DAY,
      limit: 1,
    });
    const service = new NotificationService(
      ctx.services.storage.db,
      {
        webhooksQueued: new Signal(),
        // The worker stops on the wake and gives its unstarted claim back.
        wakeWorkers: () =>
          void ctx.services.storage.db
            .updateTable('notifications')
            .set({ state: 'queued', lease_owner: null, lease_until: null, attempts: 0 })
            .where('request_id', '=', request_id)
            .execute(),
      },
      Date.now,
      60_000,
    );
    expect(await service.cancel(request_id, projectId)).toMatchObject({
      status: 'failed',
      error_message: 'Canceled',
    });
  });
});
