import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { LeaseQueue } from '../../src/queue/lease-queue.js';
import { NOTIFICATION_QUEUE } from '../../src/storage/queue.js';
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
 * take. The worker that owns them gives them back once their lease has run out.
 */
const LEASE_MS = 600;

let fx: StorageFixture;
let projectId: number;

beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());

/** The store, except that the next claim's answer is lost after it committed. */
function losingNextClaim(storage: Storage): Storage {
  let lose = true;
  return new Proxy(storage, {
    get(target, property, receiver) {
      if (property !== 'claim') return Reflect.get(target, property, receiver) as unknown;
      return async (...args: Parameters<Storage['claim']>) => {
        const rows = await target.claim(...args);
        if (!lose) return rows;
        lose = false;
        throw new Error(`Connection terminated unexpectedly (${rows.length} rows claimed)`);
      };
    },
  });
}

describe(`a claim whose answer was lost (${backend})`, () => {
  it('is given back by its live owner once the lease ran out, and claimed again', async () => {
    const now = Date.now();
    const ids = [
      await addNotification(fx.db, projectId, { run_at: now - 2 }),
      await addNotification(fx.db, projectId, { run_at: now - 1 }),
    ];
    const queue = new LeaseQueue(
      losingNextClaim(fx.storage),
      NOTIFICATION_QUEUE,
      { owner: 'worker-a', leaseMs: LEASE_MS, logger: createLogger('silent') },
      () => Promise.resolve([]),
    );
    try {
      await expect(queue.claim({ limit: 10 })).rejects.toThrow('2 rows claimed');
      for (const id of ids)
        expect(await notification(fx.db, id)).toMatchObject({ state: 'sending', lease_owner: 'worker-a' });
      // Nothing is due until the lost claim's lease ran out and the owner gave the rows back.
      expect(await queue.claim({ limit: 10 })).toEqual([]);

      await waitUntil(
        async () => ((await notification(fx.db, ids[0]!)).state === 'queued' ? true : undefined),
        {
          timeoutMs: 20 * LEASE_MS,
          what: 'the unseen rows to be given back',
        },
      );
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
