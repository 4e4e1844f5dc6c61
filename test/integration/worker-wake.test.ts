import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWokenWorker, type WokenWorker } from '../helpers/woken-worker.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The in-process API wakes the worker for each accepted send, and no wake is lost, not even one
 * that lands while a claim is running (its snapshot was taken before the new row committed). The
 * poll interval is a minute here, so a lost wake leaves its message waiting far past the waits
 * below. (test/sqlite/worker-commits-elsewhere.test.ts: what a worker on SQLite does besides.)
 */

let w: WokenWorker;
beforeAll(async () => {
  w = await startWokenWorker();
});
afterAll(() => w.stop());

describe('waking the worker', () => {
  it('claims a send accepted while a claim that missed it was running', { timeout: 60_000 }, async () => {
    const during = new Promise<void>((resolve) => {
      w.duringNextClaim(async () => {
        await w.send('during@example.org');
        resolve();
      });
    });
    await w.send('first@example.org');
    await during;
    await waitUntil(() => (w.sink.messages.length >= 2 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'both messages at the relay, well before the 60 s poll',
    });
    expect(w.sink.messages.map((m) => m.envelopeTo).sort()).toEqual([
      ['during@example.org'],
      ['first@example.org'],
    ]);
  });

  it('sends a scheduled message at its time, not at the next poll', { timeout: 60_000 }, async () => {
    await scheduledArrivesOnTime('later@example.org');
  });

  it(
    'sends a scheduled message at its time while another message holds a lane',
    { timeout: 60_000 },
    async () => {
      const slow = 'slow-relay@example.org';
      w.sink.holdRecipient(slow);
      try {
        await w.send(slow);
        await waitUntil(() => (w.sink.heldFor(slow) > 0 ? true : undefined), {
          what: 'a lane held at RCPT TO',
        });
        await scheduledArrivesOnTime('later-busy@example.org');
      } finally {
        w.sink.releaseRecipient(slow);
      }
    },
  );
});

/** Schedules a send 1.5 s ahead and waits for it at the relay: at its time, not the 60 s poll. */
async function scheduledArrivesOnTime(to: string): Promise<void> {
  const before = w.sink.messages.length;
  const dueAt = Date.now() + 1500;
  const response = await w.ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${w.apiKey}` },
    payload: {
      template: 'user_created',
      to,
      data: { user_name: 'Jo' },
      send_at: new Date(dueAt).toISOString(),
    },
  });
  expect(response.statusCode).toBe(202);
  await waitUntil(() => (w.sink.messages.length > before ? true : undefined), {
    timeoutMs: 20_000,
    what: `the scheduled message to ${to} at the relay, well before the 60 s poll`,
  });
  expect(w.sink.messages.at(-1)?.envelopeTo).toEqual([to]);
  expect(Date.now()).toBeGreaterThanOrEqual(dueAt);
}
