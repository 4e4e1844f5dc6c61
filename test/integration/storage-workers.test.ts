import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { INTERRUPTED_RESPONSE, listAttempts } from '../../src/storage/delivery-attempts.js';
import { reclaimExpiredLeases } from '../../src/storage/queue.js';
import { beat, listHeartbeats, reclaimFromDeadWorkers, removeWorker } from '../../src/storage/workers.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * Worker heartbeats in the store: one row per worker, moved by each beat, and the reclaim of a dead
 * worker's messages, which must touch that worker's rows and nobody else's.
 */
const NOW = 1_700_000_000_000;

let fx: StorageFixture;
let projectId: number;

beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());
beforeEach(async () => {
  await fx.db.deleteFrom('delivery_attempts').execute();
  await fx.db.deleteFrom('notifications').execute();
  await fx.db.deleteFrom('workers').execute();
});

/** Claimed by `owner`, having fallen due a minute before NOW. */
const sending = (owner: string) =>
  addNotification(fx.db, projectId, {
    state: 'sending',
    attempts: 2,
    run_at: NOW - 60_000,
    updated_at: NOW - 1000,
    lease_owner: owner,
    lease_until: NOW + 600_000,
  });

/** The attempts recorded of a message, as they are listed. */
const attemptsOf = async (id: number) =>
  (await listAttempts(fx.db, id)).map(({ attempt, started_at, finished_at, outcome, response, relay }) => ({
    attempt,
    started_at,
    finished_at,
    outcome,
    response,
    relay,
  }));

describe(`worker heartbeats (${backend})`, () => {
  it('keep one row per worker whose value moves with each beat', async () => {
    await beat(fx.db, 'a', NOW);
    await beat(fx.db, 'b', NOW);
    await beat(fx.db, 'a', NOW + 1000);
    const beats = await listHeartbeats(fx.db);
    expect(beats.sort((x, y) => x.owner.localeCompare(y.owner))).toEqual([
      { owner: 'a', beat: NOW + 1000 },
      { owner: 'b', beat: NOW },
    ]);
    await removeWorker(fx.db, 'a');
    expect(await listHeartbeats(fx.db)).toEqual([{ owner: 'b', beat: NOW }]);
  });

  it("return only a dead worker's messages to the queue, due as before, and remove its row", async () => {
    await beat(fx.db, 'dead', NOW);
    await beat(fx.db, 'alive', NOW);
    const mine = [await sending('dead'), await sending('dead')];
    const theirs = await sending('alive');
    const done = await addNotification(fx.db, projectId, { state: 'sent', lease_owner: 'dead' });

    const later = NOW + 6000;
    expect(await reclaimFromDeadWorkers(fx.db, [{ owner: 'dead', beat: NOW }], later)).toBe(2);
    for (const id of mine) {
      expect(await notification(fx.db, id)).toMatchObject({
        state: 'queued',
        lease_owner: null,
        lease_until: null,
        // Due as when it was claimed: taken again before mail that fell due since.
        run_at: NOW - 60_000,
      });
    }
    expect(await notification(fx.db, theirs)).toMatchObject({ state: 'sending', lease_owner: 'alive' });
    expect(await notification(fx.db, done)).toMatchObject({ state: 'sent' });
    expect((await listHeartbeats(fx.db)).map((row) => row.owner)).toEqual(['alive']);
    // Each attempt the dead worker held is on record, from its claim to its return: the relay may
    // have received it, and the next attempt may send it again.
    for (const id of mine)
      expect(await attemptsOf(id)).toEqual([
        {
          attempt: 2,
          started_at: NOW - 1000,
          finished_at: later,
          outcome: 'interrupted',
          response: INTERRUPTED_RESPONSE,
          relay: null,
        },
      ]);
    expect(await attemptsOf(theirs)).toEqual([]);
    expect(await attemptsOf(done)).toEqual([]);
  });

  it('record the attempts of leases that ran out with no worker holding them, once', async () => {
    const orphan = await sending('gone');
    expect(await reclaimExpiredLeases(fx.db, NOW + 600_001)).toBe(1);
    expect(await reclaimExpiredLeases(fx.db, NOW + 600_002)).toBe(0);
    expect(await notification(fx.db, orphan)).toMatchObject({ state: 'queued', lease_owner: null });
    expect(await attemptsOf(orphan)).toMatchObject([{ attempt: 2, outcome: 'interrupted' }]);
  });

  it('leave a worker that beat again after it was judged alone: its row and its leases', async () => {
    await beat(fx.db, 'paused', NOW);
    const mine = await sending('paused');
    await beat(fx.db, 'paused', NOW + 7000);
    expect(await reclaimFromDeadWorkers(fx.db, [{ owner: 'paused', beat: NOW }], NOW + 7001)).toBe(0);
    expect(await listHeartbeats(fx.db)).toEqual([{ owner: 'paused', beat: NOW + 7000 }]);
    expect(await notification(fx.db, mine)).toMatchObject({ state: 'sending', lease_owner: 'paused' });
  });
});
