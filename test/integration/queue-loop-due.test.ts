import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { QueueLoop, type Consumer } from '../../src/queue/loop.js';
import { NOTIFICATION_QUEUE } from '../../src/storage/queue.js';
import { waitUntil } from '../helpers/wait.js';
import { addNotification, addProject, openTestStorage, type StorageFixture } from './storage-fixture.js';

/**
 * A claim that began a moment before a row fell due, and ended after it: the loop looks for the
 * next due row once the claim is over, and must still see that one, which is due by then, instead
 * of sleeping until the poll. (A timer fires by the event loop's cached clock, which can be behind
 * Date.now(), so the claim meant for a scheduled send can run just before its time.)
 */
const NOW = 1_700_000_000_000;
const DUE = NOW + 1_000;

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

/** The ids of the rows due by `now` that one claim takes, as a worker's consumer claims them. */
async function claimAt(now: number): Promise<number[]> {
  const rows = await fx.storage.claim(NOTIFICATION_QUEUE, {
    now,
    owner: 'worker-a',
    leaseUntil: now + 60_000,
    limit: 10,
  });
  return rows.map((row) => row.id);
}

/** A started loop over `consumer`, on the clock `now`, whose poll (60 s) no test waits for. */
function startLoop(consumer: Consumer, now: () => number): QueueLoop {
  const loop = new QueueLoop(
    fx.storage,
    NOTIFICATION_QUEUE,
    consumer,
    { pollMs: 60_000, stopTimeoutMs: 1_000 },
    pino({ level: 'silent' }),
    now,
  );
  loop.start();
  return loop;
}

it('claims a row that fell due while the claim that missed it ran, not at the next poll', async () => {
  const id = await addNotification(fx.db, projectId, { run_at: DUE });
  let clock = NOW;
  const claims: { at: number; ids: number[] }[] = [];
  const consumer: Consumer = {
    hasRoom: () => true,
    busy: () => false,
    async fill() {
      const at = clock;
      const ids = await claimAt(at);
      claims.push({ at, ids });
      // The claim took until just past the row's time.
      clock = DUE + 5;
      return { claimed: ids.length, full: false, filtered: false };
    },
    drain: () => Promise.resolve(),
  };
  const loop = startLoop(consumer, () => clock);
  try {
    await waitUntil(() => (claims.some((claim) => claim.ids.length > 0) ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the row claimed, well before the 60 s poll',
    });
  } finally {
    await loop.stop();
  }
  expect(claims[0]).toEqual({ at: NOW, ids: [] });
  expect(claims.find((claim) => claim.ids.length > 0)).toEqual({ at: DUE + 5, ids: [id] });
});

it('waits for room without turning: rows due meanwhile are claimed once room comes free', async () => {
  const id = await addNotification(fx.db, projectId, { run_at: DUE });
  let clock = NOW;
  let room = true;
  let asked = 0;
  const claims: number[][] = [];
  const consumer: Consumer = {
    hasRoom: () => {
      asked++;
      return room;
    },
    busy: () => true,
    async fill() {
      const ids = await claimAt(clock);
      claims.push(ids);
      // Its lanes are full now, and the row falls due while they are.
      room = false;
      clock = DUE + 5;
      return { claimed: ids.length, full: false, filtered: false };
    },
    drain: () => Promise.resolve(),
  };
  const loop = startLoop(consumer, () => clock);
  try {
    await waitUntil(() => (claims.length > 0 ? true : undefined), { what: 'the first claim' });
    const before = asked;
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Asleep until room comes free: not a turn of the loop every millisecond.
    expect(asked - before).toBeLessThan(10);
    room = true;
    loop.resume();
    await waitUntil(() => (claims.some((ids) => ids.length > 0) ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the row claimed once room came free, well before the 60 s poll',
    });
  } finally {
    await loop.stop();
  }
  expect(claims.find((ids) => ids.length > 0)).toEqual([id]);
});

it('keeps a wake that comes while it claims after a sleep its timer ended, and stops at once', async () => {
  let claims = 0;
  let release: (() => void) | null = null;
  // Once: a short sleep that its timer ends (something may be claimed 50 ms on).
  let claimableAt: number | null = Date.now() + 50;
  const consumer: Consumer = {
    hasRoom: () => true,
    busy: () => false,
    claimableAt: () => claimableAt,
    async fill() {
      claims++;
      // The claim after the timed sleep waits here until the test has woken the loop.
      if (claims === 2) {
        claimableAt = null;
        await new Promise<void>((resolve) => (release = resolve));
      }
      return { claimed: 0, full: false, filtered: false };
    },
    drain: () => Promise.resolve(),
  };
  const loop = startLoop(consumer, Date.now);
  try {
    await waitUntil(() => (release !== null ? true : undefined), { what: 'the claim after the timed sleep' });
    loop.wake();
    release!();
    await waitUntil(() => (claims >= 3 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'a claim for the wake, well before the 60 s poll',
    });
  } finally {
    let stopped = false;
    void loop.stop().then(() => (stopped = true));
    // A stop is a wake too: it must not wait for the poll either.
    await waitUntil(() => (stopped ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the loop to stop, well before the 60 s poll',
    });
  }
});
