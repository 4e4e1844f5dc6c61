import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { parseSendRequest } from '../../src/domain/send-request.js';
import { createLogger } from '../../src/logger.js';
import { startWokenWorker, type WokenWorker } from '../helpers/woken-worker.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A worker on SQLite claims again only when a claim may find rows: after a wake, but not after
 * every message, and when another process (another connection to the file) committed, which it
 * reads in PRAGMA data_version at most every 10 ms, asleep or with its lanes busy. PostgreSQL,
 * which cannot tell cheaply, claims after each freed lane instead. The poll is a minute here.
 */

let w: WokenWorker;
beforeAll(async () => {
  w = await startWokenWorker();
});
afterAll(() => w.stop());

/**
 * Accepts a send through `other` (another connection to the same file, as a separate api process
 * would be: no wake reaches this worker, only the commit) and waits for it at the relay, where
 * `before` messages had arrived.
 */
async function deliveredFromElsewhere(other: Services, to: string, before: number): Promise<void> {
  const project = await other.projects.authenticate(w.apiKey);
  const accepted = await other.accept.accept({
    project: project!,
    sends: parseSendRequest({ template: 'user_created', to }),
  });
  expect(accepted.kind).toBe('accepted');
  await waitUntil(() => (w.sink.messages.length > before ? true : undefined), {
    timeoutMs: 20_000,
    what: `${to} at the relay, well before the 60 s poll`,
  });
  expect(w.sink.messages.at(-1)?.envelopeTo).toEqual([to]);
}

describe('a worker on SQLite', () => {
  it(
    'claims once for a batch it was woken for, not again after every message',
    { timeout: 60_000 },
    async () => {
      const before = w.sink.messages.length;
      const claimsBefore = w.claims();
      const response = await w.ctx.app.inject({
        method: 'POST',
        url: '/api/v1/notifications/batch',
        headers: { authorization: `Bearer ${w.apiKey}` },
        payload: Array.from({ length: 40 }, (_, i) => ({
          template: 'user_created',
          to: `batch${i}@example.org`,
          data: { user_name: 'Jo' },
        })),
      });
      expect(response.statusCode).toBe(202);
      await waitUntil(() => (w.sink.messages.length >= before + 40 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the 40 messages at the relay',
      });
      // One wake, one claim of all 40 (and at most a claim or two that races the wake). A claim
      // after each freed lane would be about 40 more.
      expect(w.claims() - claimsBefore).toBeLessThanOrEqual(4);
    },
  );

  it('finds work another process committed without waiting for the poll', { timeout: 60_000 }, async () => {
    const before = w.sink.messages.length;
    const other = await openServices(w.ctx.config, createLogger('silent'));
    try {
      await deliveredFromElsewhere(other, 'elsewhere@example.org', before);
    } finally {
      await closeServices(other);
    }
  });

  it('finds work another process committed while its lanes are busy', { timeout: 60_000 }, async () => {
    const other = await openServices(w.ctx.config, createLogger('silent'));
    try {
      w.sink.holdRecipient('slow@example.org');
      await w.send('slow@example.org');
      await waitUntil(() => (w.sink.heldFor('slow@example.org') === 1 ? true : undefined), {
        what: 'a transaction in flight',
      });
      await deliveredFromElsewhere(other, 'while-busy@example.org', w.sink.messages.length);
      expect(w.sink.heldFor('slow@example.org')).toBe(1);
    } finally {
      w.sink.releaseRecipient('slow@example.org');
      await closeServices(other);
    }
  });
});
