import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  FinishStatement,
  nextDueAt,
  NOTIFICATION_QUEUE,
  reclaimExpiredLeases,
  releaseClaims,
  releaseUnseenClaims,
  WEBHOOK_QUEUE,
} from '../../src/storage/queue.js';
import type { NotificationRow, WebhookDeliveryState } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { dueEndpoints } from '../../src/storage/webhooks.js';
import { beat } from '../../src/storage/workers.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * The queue contract of every storage backend: batch claims under a lease, lease renewal and
 * outcome recording by the owner only, and the return of expired or released claims to the queue.
 * Written against the notification queue; the webhook queue runs through the same statements,
 * and its own filter (per endpoint) is checked at the end.
 */
const NOW = 1_700_000_000_000;
const LEASE_MS = 60_000;

let fx: StorageFixture;
let projectId: number;

beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());
beforeEach(async () => {
  await fx.db.deleteFrom('notifications').execute();
});

function claim(storage: Storage, owner: string, limit: number, now = NOW): Promise<NotificationRow[]> {
  return storage.claim(NOTIFICATION_QUEUE, { now, owner, leaseUntil: now + LEASE_MS, limit });
}

const renew = (owner: string, ids: readonly number[], leaseUntil: number) =>
  fx.storage.renew(NOTIFICATION_QUEUE, { ids, owner, leaseUntil });

const release = (ids: readonly number[], owner: string, now: number) =>
  releaseClaims(fx.db, NOTIFICATION_QUEUE, ids, owner, now);

const COLUMNS = [
  'state',
  'run_at',
  'sent_at',
  'error_message',
  'transport',
  'message_id',
  'subject',
  'text_body',
  'html_body',
  'updated_at',
] as const;
type FinishedColumns = Pick<NotificationRow, (typeof COLUMNS)[number]>;
const FINISH = new FinishStatement(NOTIFICATION_QUEUE, COLUMNS);

/** Finishes the row as taken by its `attempts`-th claim (the first, unless said). */
function finishDelivery(db: typeof fx.db, id: number, owner: string, columns: FinishedColumns, attempts = 1) {
  return FINISH.run(db, { id, attempts }, owner, columns);
}

async function addDue(count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++)
    ids.push(await addNotification(fx.db, projectId, { run_at: NOW - 10_000 + i }));
  return ids;
}

describe(`claim (${backend})`, () => {
  it('claims due queued rows oldest first, up to the limit, as sending under a lease', async () => {
    const due = await addDue(5);
    await addNotification(fx.db, projectId, { run_at: NOW + 1 });
    await addNotification(fx.db, projectId, { state: 'sent', run_at: NOW - 50_000 });
    await addNotification(fx.db, projectId, { state: 'failed', run_at: NOW - 50_000 });
    await addNotification(fx.db, projectId, { state: 'sending', run_at: NOW - 50_000, lease_until: NOW + 1 });

    const first = await claim(fx.storage, 'worker-a', 3);
    expect(first.map((row) => row.id)).toEqual(due.slice(0, 3));
    for (const row of first) {
      expect(row).toMatchObject({
        state: 'sending',
        lease_owner: 'worker-a',
        lease_until: NOW + LEASE_MS,
        attempts: 1,
        updated_at: NOW,
      });
    }
    const stored = await notification(fx.db, due[0]!);
    expect(stored).toMatchObject({ state: 'sending', lease_owner: 'worker-a', attempts: 1 });

    const second = await claim(fx.storage, 'worker-b', 10);
    expect(second.map((row) => row.id)).toEqual(due.slice(3));
    expect(await claim(fx.storage, 'worker-c', 10)).toEqual([]);
  });

  it("takes the projects' due rows in turns: a backlog shares the next claim with another project's mail", async () => {
    const [quiet, third] = [await addProject(fx.db), await addProject(fx.db)];
    const backlog = await addDue(120);
    const quietOne = await addNotification(fx.db, quiet, { run_at: NOW - 500 });
    const thirds = [
      await addNotification(fx.db, third, { run_at: NOW - 400 }),
      await addNotification(fx.db, third, { run_at: NOW - 300 }),
    ];

    // Each project's oldest, then each one's second, …: returned in that order, to be started so.
    const first = await claim(fx.storage, 'worker-a', 6);
    expect(first.map((row) => row.id)).toEqual([
      backlog[0],
      quietOne,
      thirds[0],
      backlog[1],
      thirds[1],
      backlog[2],
    ]);
    // A project alone has the whole claim.
    const second = await claim(fx.storage, 'worker-a', 50);
    expect(second.map((row) => row.id)).toEqual(backlog.slice(3, 53));

    // Projects a worker leaves out (their relay's lane is full) are not read at all.
    const lateQuiet = await addNotification(fx.db, quiet, { run_at: NOW });
    const filtered = await fx.storage.claim(NOTIFICATION_QUEUE, {
      now: NOW,
      owner: 'worker-b',
      leaseUntil: NOW + LEASE_MS,
      limit: 50,
      excludeProjects: [projectId],
    });
    expect(filtered.map((row) => row.id)).toEqual([lateQuiet]);
  });

  it('counts one more attempt on each claim of a retried row', async () => {
    const id = await addNotification(fx.db, projectId, { attempts: 2, run_at: NOW - 1 });
    const [row] = await claim(fx.storage, 'worker-a', 1);
    expect(row).toMatchObject({ id, attempts: 3 });
  });

  it('takes a row that becomes due only once its run_at has come', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: NOW + 5_000 });
    expect(await claim(fx.storage, 'worker-a', 10)).toEqual([]);
    expect(await nextDueAt(fx.db, NOTIFICATION_QUEUE, NOW)).toBe(NOW + 5_000);
    expect(await nextDueAt(fx.db, NOTIFICATION_QUEUE, NOW + 5_000)).toBeNull();
    const later = await claim(fx.storage, 'worker-a', 10, NOW + 5_000);
    expect(later.map((row) => row.id)).toEqual([id]);
    expect(await nextDueAt(fx.db, NOTIFICATION_QUEUE, 0)).toBeNull();
  });

  it('never gives the same row to two concurrent claims', async () => {
    const other = await fx.openAnother();
    const due = await addDue(60);
    const [a, b] = await Promise.all([claim(fx.storage, 'worker-a', 40), claim(other, 'worker-b', 40)]);
    const ids = [...a, ...b].map((row) => row.id);
    expect(a.length).toBeLessThanOrEqual(40);
    expect(b.length).toBeLessThanOrEqual(40);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(60);
    expect(new Set(ids)).toEqual(new Set(due));
    for (const row of a) expect(row.lease_owner).toBe('worker-a');
    for (const row of b) expect(row.lease_owner).toBe('worker-b');
  });

  it('splits a backlog between many concurrent claimers, each row exactly once', async () => {
    const storages = [fx.storage, await fx.openAnother(), await fx.openAnother()];
    const due = new Set(await addDue(400));
    const limit = 25;
    const claimed: { owner: string; id: number }[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const owner = `worker-${i}`;
        for (;;) {
          const rows = await claim(storages[i % storages.length]!, owner, limit);
          expect(rows.length).toBeLessThanOrEqual(limit);
          if (rows.length === 0) return;
          for (const row of rows) claimed.push({ owner, id: row.id });
        }
      }),
    );
    const ids = claimed.map((c) => c.id);
    expect(ids.length).toBe(due.size);
    expect(new Set(ids)).toEqual(due);
    // Each row ends with the owner that claimed it, claimed once (attempts 1).
    const rows = await fx.db.selectFrom('notifications').select(['id', 'lease_owner', 'attempts']).execute();
    const owners = new Map(claimed.map((c) => [c.id, c.owner]));
    for (const row of rows) {
      expect(row.attempts).toBe(1);
      expect(row.lease_owner).toBe(owners.get(row.id));
    }
  });
});

/** An outcome's columns: the given ones, the rest as a claimed row of addDue has them. */
function finished(
  columns: Pick<FinishedColumns, 'state' | 'updated_at'> & Partial<FinishedColumns>,
): FinishedColumns {
  return {
    run_at: NOW,
    sent_at: null,
    error_message: null,
    transport: null,
    message_id: null,
    subject: null,
    text_body: null,
    html_body: null,
    ...columns,
  };
}

describe(`leases (${backend})`, () => {
  it('renews only the leases its owner holds on rows still sending', async () => {
    const [id, sentId] = await addDue(2);
    await claim(fx.storage, 'worker-a', 2);
    await finishDelivery(
      fx.db,
      sentId!,
      'worker-a',
      finished({ state: 'sent', sent_at: NOW, updated_at: NOW }),
    );

    await renew('worker-b', [id!, sentId!], NOW + 10 * LEASE_MS);
    expect((await notification(fx.db, id!)).lease_until).toBe(NOW + LEASE_MS);

    await renew('worker-a', [id!, sentId!], NOW + 2 * LEASE_MS);
    expect(await notification(fx.db, id!)).toMatchObject({
      state: 'sending',
      lease_owner: 'worker-a',
      lease_until: NOW + 2 * LEASE_MS,
    });
    expect(await notification(fx.db, sentId!)).toMatchObject({ state: 'sent', lease_until: null });
    await renew('worker-a', [], NOW);
  });

  it('records an outcome only for the worker holding the lease, and only once', async () => {
    const [id] = await addDue(1);
    await claim(fx.storage, 'worker-a', 1);
    const sent = finished({ state: 'sent', sent_at: NOW + 5, updated_at: NOW + 5, transport: 'smtp' });

    expect(await finishDelivery(fx.db, id!, 'worker-b', sent)).toBe(false);
    expect(await notification(fx.db, id!)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });

    expect(await finishDelivery(fx.db, id!, 'worker-a', sent)).toBe(true);
    expect(await notification(fx.db, id!)).toMatchObject({
      state: 'sent',
      sent_at: NOW + 5,
      transport: 'smtp',
      lease_owner: null,
      lease_until: null,
    });
    expect(
      await finishDelivery(fx.db, id!, 'worker-a', finished({ state: 'failed', updated_at: NOW + 6 })),
    ).toBe(false);
    expect((await notification(fx.db, id!)).state).toBe('sent');
  });

  it('never records the outcome of an earlier claim over a later claim by the same worker', async () => {
    const [id] = await addDue(1);
    await claim(fx.storage, 'worker-a', 1);
    // The first claim's outcome, a retry due now, is stored (its answer may be lost on the way).
    const retry = finished({ state: 'queued', run_at: NOW, updated_at: NOW + 1 });
    expect(await finishDelivery(fx.db, id!, 'worker-a', retry)).toBe(true);
    const again = await claim(fx.storage, 'worker-a', 1, NOW + 2);
    expect(again.map((row) => [row.id, row.attempts])).toEqual([[id, 2]]);

    // The first outcome stored once more (a retry of a commit whose answer was lost) finds no row.
    expect(await finishDelivery(fx.db, id!, 'worker-a', retry)).toBe(false);
    expect(await notification(fx.db, id!)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
    const sent = finished({ state: 'sent', sent_at: NOW + 3, updated_at: NOW + 3 });
    expect(await finishDelivery(fx.db, id!, 'worker-a', sent, 2)).toBe(true);
    expect(await notification(fx.db, id!)).toMatchObject({ state: 'sent', attempts: 2, lease_owner: null });
  });

  it('returns rows whose lease expired to the queue, keeping the attempt counted', async () => {
    const [expired, renewed] = await addDue(2);
    await claim(fx.storage, 'worker-dead', 2);
    // Queued after the claim, due before the reclaim: the mail that was in flight still goes first.
    const since = await addNotification(fx.db, projectId, { run_at: NOW + 1 });
    await renew('worker-dead', [renewed!], NOW + 3 * LEASE_MS);

    expect(await reclaimExpiredLeases(fx.db, NOW + LEASE_MS - 1)).toBe(0);
    // The lease runs until lease_until; it is expired strictly after.
    expect(await reclaimExpiredLeases(fx.db, NOW + LEASE_MS)).toBe(0);
    const later = NOW + LEASE_MS + 1;
    expect(await reclaimExpiredLeases(fx.db, later)).toBe(1);
    expect(await notification(fx.db, expired!)).toMatchObject({
      state: 'queued',
      lease_owner: null,
      lease_until: null,
      attempts: 1,
      run_at: NOW - 10_000,
      updated_at: later,
    });
    expect((await notification(fx.db, renewed!)).state).toBe('sending');

    // Another worker takes it at once, first; the dead worker can no longer record an outcome.
    const retaken = await claim(fx.storage, 'worker-b', 10, later);
    expect(retaken.map((row) => [row.id, row.attempts])).toEqual([
      [expired, 2],
      [since, 1],
    ]);
    expect(
      await finishDelivery(
        fx.db,
        expired!,
        'worker-dead',
        finished({ state: 'sent', sent_at: later, updated_at: later }),
      ),
    ).toBe(false);
    expect(await reclaimExpiredLeases(fx.db, later)).toBe(0);
  });

  it('leaves an expired lease to an owner whose heartbeat is alive', async () => {
    const [id] = await addDue(1);
    await claim(fx.storage, 'worker-alive', 1);
    // A live worker whose outcome the store refused (a full disk) keeps retrying it: taking the
    // row back would send the message twice. Only a dead owner's rows go back.
    await beat(fx.db, 'worker-alive', NOW);
    const later = NOW + 10 * LEASE_MS;
    expect(await reclaimExpiredLeases(fx.db, later)).toBe(0);
    expect(await notification(fx.db, id!)).toMatchObject({ state: 'sending', lease_owner: 'worker-alive' });
    await fx.db.deleteFrom('workers').where('owner', '=', 'worker-alive').execute();
    expect(await reclaimExpiredLeases(fx.db, later)).toBe(1);
  });

  it('releases claims of its owner back to the queue without counting an attempt', async () => {
    const ids = await addDue(3);
    await claim(fx.storage, 'worker-a', 3);

    await release(ids.slice(0, 2), 'worker-b', NOW + 1);
    for (const id of ids) expect((await notification(fx.db, id)).state).toBe('sending');

    await release(ids.slice(0, 2), 'worker-a', NOW + 1);
    for (const id of ids.slice(0, 2)) {
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'queued',
        attempts: 0,
        lease_owner: null,
        lease_until: null,
        updated_at: NOW + 1,
      });
    }
    expect(await notification(fx.db, ids[2]!)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
    await release([], 'worker-a', NOW + 1);

    const again = await claim(fx.storage, 'worker-b', 10, NOW + 2);
    expect(again.map((row) => row.id)).toEqual(ids.slice(0, 2));
    expect(again.every((row) => row.attempts === 1)).toBe(true);
  });
});

describe(`claims a live worker never saw (${backend})`, () => {
  it('go back to the queue once expired, uncounted, leaving the rows it holds', async () => {
    const [unseen, held, fresh] = await addDue(3);
    // A claim whose answer was lost: committed, so its rows are leased to worker-a, unseen.
    await claim(fx.storage, 'worker-a', 2);
    await claim(fx.storage, 'worker-a', 1, NOW + LEASE_MS);
    const later = NOW + LEASE_MS + 1;

    // Not yet expired: nothing moves. Another owner's call moves nothing either.
    expect(await releaseUnseenClaims(fx.db, NOTIFICATION_QUEUE, 'worker-a', [held!], NOW + LEASE_MS)).toBe(0);
    expect(await releaseUnseenClaims(fx.db, NOTIFICATION_QUEUE, 'worker-b', [], later)).toBe(0);

    expect(await releaseUnseenClaims(fx.db, NOTIFICATION_QUEUE, 'worker-a', [held!], later)).toBe(1);
    expect(await notification(fx.db, unseen!)).toMatchObject({
      state: 'queued',
      attempts: 0,
      lease_owner: null,
      lease_until: null,
      run_at: later,
    });
    // Held (its outcome may be waiting to be stored) although expired, and not yet expired.
    expect(await notification(fx.db, held!)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
    expect(await notification(fx.db, fresh!)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
    expect(await releaseUnseenClaims(fx.db, NOTIFICATION_QUEUE, 'worker-a', [], later)).toBe(1);
    expect((await notification(fx.db, held!)).state).toBe('queued');
  });
});

describe(`the webhook queue (${backend})`, () => {
  it('claims per endpoint through the same statements, and returns expired leases', async () => {
    const endpoints: number[] = [];
    for (const url of ['https://a.example/hooks', 'https://b.example/hooks'])
      endpoints.push(
        (
          await fx.db
            .insertInto('webhook_endpoints')
            .values({
              project_id: projectId,
              url,
              events: null,
              secret_enc: 'x',
              enabled: 1,
              created_at: NOW,
              updated_at: NOW,
            })
            .returning('id')
            .executeTakeFirstOrThrow()
        ).id,
      );
    const event = await fx.db
      .insertInto('webhook_events')
      .values({
        project_id: projectId,
        notification_id: null,
        webhook_id: 'msg_1',
        type: 'webhook.test',
        payload: '{}',
        created_at: NOW,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    for (const endpoint of [...endpoints, endpoints[0]!])
      await fx.db
        .insertInto('webhook_deliveries')
        .values({
          event_id: event.id,
          endpoint_id: endpoint,
          project_id: projectId,
          state: 'pending',
          attempts: 0,
          run_at: NOW - 1,
          created_at: NOW,
          updated_at: NOW,
        })
        .execute();
    const lease = { now: NOW, owner: 'worker-a', leaseUntil: NOW + LEASE_MS };
    const a = await fx.storage.claim(WEBHOOK_QUEUE, { ...lease, limit: 10, endpointId: endpoints[0]! });
    expect(a.map((row) => [row.endpoint_id, row.state, row.attempts])).toEqual([
      [endpoints[0], 'sending', 1],
      [endpoints[0], 'sending', 1],
    ]);
    expect(await nextDueAt(fx.db, WEBHOOK_QUEUE, 0)).toBe(NOW - 1);
    const rest = await fx.storage.claim(WEBHOOK_QUEUE, { ...lease, owner: 'worker-b', limit: 10 });
    expect(rest.map((row) => row.endpoint_id)).toEqual([endpoints[1]]);
    await releaseClaims(fx.db, WEBHOOK_QUEUE, [rest[0]!.id], 'worker-b', NOW + 1);
    expect(await reclaimExpiredLeases(fx.db, NOW + LEASE_MS + 1)).toBe(2);
    const again = await fx.storage.claim(WEBHOOK_QUEUE, { ...lease, now: NOW + LEASE_MS + 2, limit: 10 });
    expect(again.map((row) => row.attempts).sort()).toEqual([1, 2, 2]);
  });

  it('finds the endpoints with deliveries due, the longest-waiting first, within the exclusions', async () => {
    await fx.db.deleteFrom('webhook_deliveries').execute();
    await fx.db.deleteFrom('webhook_endpoints').execute();
    const event = await fx.db
      .insertInto('webhook_events')
      .values({
        project_id: projectId,
        notification_id: null,
        webhook_id: 'msg_due',
        type: 'webhook.test',
        payload: '{}',
        created_at: NOW,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const other = await addProject(fx.db);
    const endpoint = async (
      project: number,
      deliveries: readonly { state: WebhookDeliveryState; runAt: number }[],
      enabled = 1,
    ) => {
      const { id } = await fx.db
        .insertInto('webhook_endpoints')
        .values({
          project_id: project,
          url: `https://${randomUUID()}.example/hooks`,
          events: null,
          secret_enc: 'x',
          enabled,
          created_at: NOW,
          updated_at: NOW,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      for (const { state, runAt } of deliveries)
        await fx.db
          .insertInto('webhook_deliveries')
          .values({
            event_id: event.id,
            endpoint_id: id,
            project_id: project,
            state,
            attempts: 0,
            run_at: runAt,
            created_at: NOW,
            updated_at: NOW,
          })
          .execute();
      return id;
    };
    const first = await endpoint(projectId, [
      { state: 'pending', runAt: NOW - 5 },
      { state: 'pending', runAt: NOW - 30 },
      { state: 'pending', runAt: NOW + 100 },
    ]);
    const third = await endpoint(projectId, [{ state: 'pending', runAt: NOW - 10 }]);
    const second = await endpoint(other, [{ state: 'pending', runAt: NOW - 20 }]);
    await endpoint(projectId, [{ state: 'pending', runAt: NOW + 1 }]);
    await endpoint(projectId, [{ state: 'pending', runAt: NOW - 50 }], 0);
    await endpoint(projectId, [
      { state: 'sending', runAt: NOW - 100 },
      { state: 'succeeded', runAt: NOW - 100 },
    ]);
    const due = (exclude: { endpoints?: number[]; projects?: number[] } = {}, limit = 10) =>
      dueEndpoints(
        fx.db,
        NOW,
        { endpoints: exclude.endpoints ?? [], projects: exclude.projects ?? [] },
        limit,
      );
    expect(await due()).toEqual([first, second, third]);
    expect(await due({}, 2)).toEqual([first, second]);
    expect(await due({ endpoints: [first] })).toEqual([second, third]);
    expect(await due({ projects: [other] })).toEqual([first, third]);
    expect(
      await dueEndpoints(fx.db, NOW + 1, { endpoints: [first, second, third], projects: [] }, 10),
    ).toHaveLength(1);
  });
});
