import type { Kysely, KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { LeaseQueue, type RecordOutcomes } from '../../src/queue/lease-queue.js';
import { FinishStatement, NOTIFICATION_QUEUE, reclaimOwners } from '../../src/storage/queue.js';
import type { Database, NotificationRow } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { waitUntil } from '../helpers/wait.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * A claim that commits while its answer is lost (the connection to the database drops after the
 * commit): the rows are leased to a live worker that never saw them, which no other worker may
 * take. The worker that owns them gives them back once their lease has run out. So do rows it
 * claimed but could not start, when the store refused to take them back.
 */
const LEASE_MS = 600;

let fx: StorageFixture;
let projectId: number;

beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());

/** The store, except that the next claim made while `armed()` loses its answer after it committed. */
function losingNextClaim(storage: Storage, armed: () => boolean = () => true): Storage {
  let lose = true;
  return new Proxy(storage, {
    get(target, property, receiver) {
      if (property !== 'claim') return Reflect.get(target, property, receiver) as unknown;
      return async (...args: Parameters<Storage['claim']>) => {
        const rows = await target.claim(...args);
        if (!lose || !armed()) return rows;
        lose = false;
        throw new Error(`Connection terminated unexpectedly (${rows.length} rows claimed)`);
      };
    },
  });
}

/** The store, except that every statement fails while `refusing()` says so (a lost connection). */
function refusingWhile(storage: Storage, refusing: () => boolean): Storage {
  const refuse: KyselyPlugin = {
    transformQuery(args) {
      if (refusing()) throw new Error('Connection terminated unexpectedly');
      return args.node;
    },
    transformResult: (args) => Promise.resolve(args.result),
  };
  const db = storage.db.withPlugin(refuse);
  return new Proxy(storage, {
    get: (target, property, receiver) =>
      property === 'db' ? db : (Reflect.get(target, property, receiver) as unknown),
  });
}

async function waitQueued(id: number): Promise<void> {
  await waitUntil(async () => ((await notification(fx.db, id)).state === 'queued' ? true : undefined), {
    timeoutMs: 20 * LEASE_MS,
    what: `row ${id} to be given back`,
  });
}

describe(`a claim whose answer was lost (${backend})`, () => {
  it('is given back by its live owner once the lease ran out, and claimed again', async () => {
    const now = Date.now();
    const ids = [
      await addNotification(fx.db, projectId, { run_at: now - 2 }),
      await addNotification(fx.db, projectId, { run_at: now - 1 }),
    ];
    const queue = queueOf(losingNextClaim(fx.storage), 'worker-a');
    try {
      await expect(queue.claim({ limit: 10 })).rejects.toThrow('2 rows claimed');
      for (const id of ids)
        expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
      // Nothing is due until the lost claim's lease ran out and the owner gave the rows back.
      expect(await queue.claim({ limit: 10 })).toEqual([]);

      await waitQueued(ids[0]!);
      for (const id of ids)
        expect(await notification(fx.db, id)).toMatchObject({
          state: 'queued',
          attempts: 0,
          lease_owner: null,
        });
      const again = await queue.claim({ limit: 10 });
      expect(again.map((row) => [row.id, row.attempts])).toEqual(ids.map((id) => [id, 1]));

      // Rows it holds are renewed, never given back, however long they are held.
      await new Promise((resolve) => setTimeout(resolve, 3 * LEASE_MS));
      for (const id of ids)
        expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
    } finally {
      queue.close();
    }
  });
});

describe(`claimed rows a worker cannot start (${backend})`, () => {
  it('are given back at once when what they need cannot be read', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    const queue = queueOf(fx.storage, 'worker-b');
    try {
      await expect(
        queue.claimAndRead({ limit: 10 }, () => Promise.reject(new Error('suppressions unreadable'))),
      ).rejects.toThrow('suppressions unreadable');
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'queued',
        attempts: 0,
        lease_owner: null,
      });
      expect(queue.holding).toBe(0);
      const { rows, extra } = await queue.claimAndRead({ limit: 10 }, (claimed) =>
        Promise.resolve(claimed.length),
      );
      expect([rows.map((row) => row.id), extra]).toEqual([[id], 1]);
    } finally {
      queue.close();
    }
  });

  it('return to the queue once their lease ran out when the store refused to take them back', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    let refusing = false;
    const queue = queueOf(
      refusingWhile(fx.storage, () => refusing),
      'worker-c',
    );
    try {
      const rows = await queue.claim({ limit: 10 });
      expect(rows.map((row) => row.id)).toEqual([id]);
      refusing = true;
      await queue.release(rows);
      refusing = false;
      // Leased to a live worker that no longer holds it: no renewal keeps it, no other worker takes it.
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-c' });
      expect(queue.holding).toBe(0);

      await waitQueued(id);
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'queued',
        attempts: 0,
        lease_owner: null,
      });
      expect((await queue.claim({ limit: 10 })).map((row) => [row.id, row.attempts])).toEqual([[id, 1]]);
    } finally {
      queue.close();
    }
  });
});

/** An outcome as these tests store it: the row's next state and when it is due. */
interface Next {
  readonly state: 'queued' | 'sent';
  readonly runAt: number;
}

const FINISH = new FinishStatement(NOTIFICATION_QUEUE, ['state', 'run_at', 'updated_at'] as const);

/** A queue of the notifications in `storage`, leased to `owner`, storing outcomes as `Next`. */
function queueOf(storage: Storage, owner: string, now?: () => number): LeaseQueue<'notifications', Next> {
  return new LeaseQueue(
    storage,
    NOTIFICATION_QUEUE,
    { owner, leaseMs: LEASE_MS, logger: createLogger('silent'), now },
    recordNext(owner),
  );
}

function recordNext(owner: string): RecordOutcomes<NotificationRow, Next> {
  return (tx, items) =>
    FINISH.runEach(
      tx,
      owner,
      items,
      ({ outcome }) => ({ state: outcome.state, run_at: outcome.runAt, updated_at: Date.now() }),
      () => Promise.resolve(),
    );
}

/** The store, except that the next transaction's answer is lost after it committed. */
function losingNextCommit(storage: Storage, lose: { next: boolean }): Storage {
  const db = new Proxy(storage.db, {
    get(target, property) {
      if (property !== 'transaction') {
        // Kysely's methods read private fields: they must run on the instance, not the proxy.
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      }
      return () => ({
        execute: async <T>(work: (tx: Kysely<Database>) => Promise<T>) => {
          const result = await target.transaction().execute(work);
          if (!lose.next) return result;
          lose.next = false;
          throw new Error('Connection terminated unexpectedly (after the commit)');
        },
      });
    },
  });
  return new Proxy(storage, {
    get: (target, property, receiver) =>
      property === 'db' ? db : (Reflect.get(target, property, receiver) as unknown),
  });
}

/** The store, except that a claim's answer comes `ms` after it committed (a slow link). */
function answeringClaimsLate(storage: Storage, ms: number): Storage {
  return new Proxy(storage, {
    get(target, property, receiver) {
      if (property !== 'claim') return Reflect.get(target, property, receiver) as unknown;
      return async (...args: Parameters<Storage['claim']>) => {
        const rows = await target.claim(...args);
        await new Promise((resolve) => setTimeout(resolve, ms));
        return rows;
      };
    },
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`leases under a failing store (${backend})`, () => {
  beforeEach(async () => {
    // Only this test's rows are due.
    await fx.db
      .updateTable('notifications')
      .set({ state: 'failed', lease_owner: null, lease_until: null })
      .execute();
  });

  it('never stores an outcome retried after a lost answer over the next claim by the same worker', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    const lose = { next: false };
    const queue = queueOf(losingNextCommit(fx.storage, lose), 'worker-d');
    try {
      const [first] = await queue.claim({ limit: 1 });
      // The first attempt failed for now: a retry, due at once. Its commit's answer is lost, so the
      // outcome is stored again a second later.
      lose.next = true;
      const firstStored = queue.finish(first!, { state: 'queued', runAt: Date.now() });
      await waitQueued(id);
      const [second] = await queue.claim({ limit: 1 });
      expect([second!.id, second!.attempts]).toEqual([id, 2]);

      expect(await firstStored).toBe(false);
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-d' });
      // The second claim is still held: renewed, never given back.
      expect(queue.holding).toBe(1);
      expect(await queue.finish(second!, { state: 'sent', runAt: second!.run_at })).toBe(true);
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sent', attempts: 2, lease_owner: null });
    } finally {
      queue.close();
    }
  });

  it('gives back unheld rows whose lease runs out later than foreseen (a clock stepped back)', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    let offset = 0;
    let refusing = false;
    const queue = queueOf(
      refusingWhile(fx.storage, () => refusing),
      'worker-e',
      () => Date.now() + offset,
    );
    try {
      const rows = await queue.claim({ limit: 10 });
      offset = -2 * LEASE_MS;
      refusing = true;
      await queue.release(rows);
      refusing = false;
      await waitQueued(id);
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'queued',
        attempts: 0,
        lease_owner: null,
      });
    } finally {
      queue.close();
    }
  });

  it('never gives back the rows of a claim whose answer comes after their lease ran out', async () => {
    const stray = await addNotification(fx.db, projectId, { run_at: Date.now() - 2 });
    let refusing = false;
    let late = false;
    const storage = refusingWhile(fx.storage, () => refusing);
    const slow = answeringClaimsLate(storage, 3 * LEASE_MS);
    const queue = queueOf(
      new Proxy(storage, {
        get: (target, property, receiver) =>
          Reflect.get(late && property === 'claim' ? slow : target, property, receiver) as unknown,
      }),
      'worker-f',
    );
    try {
      // A release the store refused: renewals look for unheld rows of this worker once the
      // stray's lease has run out, which happens while the next claim waits for its answer.
      const strays = await queue.claim({ limit: 10 });
      expect(strays.map((row) => row.id)).toEqual([stray]);
      refusing = true;
      await queue.release(strays);
      refusing = false;

      const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
      late = true;
      const rows = await queue.claim({ limit: 10 });
      expect(rows.map((row) => row.id)).toEqual([id]);
      expect(await notification(fx.db, stray)).toMatchObject({ state: 'queued', lease_owner: null });
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-f' });
      // Held now, so renewed like any other.
      await sleep(2 * LEASE_MS);
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-f' });
    } finally {
      queue.close();
    }
  });
  it('sweeps a lost claim of a row it still held under an earlier claim', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    const lose = { next: false };
    let loseClaim = false;
    let offset = 0;
    const queue = queueOf(
      losingNextClaim(losingNextCommit(fx.storage, lose), () => loseClaim),
      'worker-g',
      () => Date.now() + offset,
    );
    try {
      const [first] = await queue.claim({ limit: 1 });
      // A retry due at once, whose commit's answer is lost: it is stored again a second later.
      lose.next = true;
      const firstStored = queue.finish(first!, { state: 'queued', runAt: Date.now() });
      await waitQueued(id);
      // The next claim of the row commits with its answer lost too: leased to worker-g, unseen.
      loseClaim = true;
      await expect(queue.claim({ limit: 1 })).rejects.toThrow('1 rows claimed');
      loseClaim = false;
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'sending',
        lease_owner: 'worker-g',
        attempts: 2,
      });
      // The lost claim's lease has run out, in this worker's time, before the outcome's retry.
      offset = LEASE_MS;
      expect(await firstStored).toBe(false);
      expect(queue.holding).toBe(0);
      await waitQueued(id);
      expect(await notification(fx.db, id)).toMatchObject({ attempts: 1, lease_owner: null });
    } finally {
      queue.close();
    }
  });

  it('keeps a row held under a later claim when it gives back an earlier one', async () => {
    const id = await addNotification(fx.db, projectId, { run_at: Date.now() - 1 });
    const queue = queueOf(fx.storage, 'worker-h');
    try {
      const [first] = await queue.claim({ limit: 1 });
      // Judged dead during a pause: its rows went back, and it claimed this one again.
      await reclaimOwners(fx.db, ['worker-h'], Date.now());
      const [second] = await queue.claim({ limit: 1 });
      expect([second!.id, second!.attempts]).toEqual([id, 2]);
      // A stop gives back the earlier job, never started.
      await queue.release([first!]);
      expect(queue.holding).toBe(1);
      expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-h' });
      expect(await queue.finish(second!, { state: 'sent', runAt: second!.run_at })).toBe(true);
    } finally {
      queue.close();
    }
  });
});
