import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createWorker, openServices } from '../../src/compose.js';
import { parseSendRequest } from '../../src/domain/send-request.js';
import { createLogger } from '../../src/logger.js';
import type { ClaimRequest } from '../../src/storage/storage.js';
import type { DeliveryWorker } from '../../src/worker/worker.js';
import { backend } from '../helpers/database.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The in-process API wakes the worker for each accepted send, and no wake is lost, not even one
 * that lands while a claim is running (its snapshot was taken before the new row committed). The
 * poll interval is a minute here, so a lost wake leaves its message waiting far past the waits
 * below.
 */

let sink: SmtpSink;
let ctx: TestContext;
let worker: DeliveryWorker;
let apiKey: string;
/** Called inside the next claim, after its query and before it returns. */
let duringNextClaim: (() => Promise<void>) | null = null;
let claims = 0;

async function send(to: string): Promise<void> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jo' } },
  });
  expect(response.statusCode).toBe(202);
}

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
    HERALD_DELIVERY_POLL_MS: '60000',
  });
  apiKey = (await seedProject(ctx.services)).apiKey;
  const { storage } = ctx.services;
  const claimDue = storage.claimDue.bind(storage);
  storage.claimDue = async (claim: ClaimRequest) => {
    const rows = await claimDue(claim);
    claims++;
    const during = duringNextClaim;
    duringNextClaim = null;
    await during?.();
    return rows;
  };
  worker = createWorker(ctx.services);
  ctx.services.notifications.onAccepted(() => worker.wake());
  worker.start();
  await waitUntil(() => (claims > 0 ? true : undefined), { what: 'the first claim' });
});

afterAll(async () => {
  await worker.stop();
  await ctx.close();
  await sink.stop();
});

describe('waking the worker', () => {
  it('claims a send accepted while a claim that missed it was running', { timeout: 60_000 }, async () => {
    const during = new Promise<void>((resolve) => {
      duringNextClaim = async () => {
        await send('during@example.org');
        resolve();
      };
    });
    await send('first@example.org');
    await during;
    await waitUntil(() => (sink.messages.length >= 2 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'both messages at the relay, well before the 60 s poll',
    });
    expect(sink.messages.map((m) => m.envelopeTo).sort()).toEqual([
      ['during@example.org'],
      ['first@example.org'],
    ]);
  });

  it('sends a scheduled message at its time, not at the next poll', { timeout: 60_000 }, async () => {
    const before = sink.messages.length;
    const dueAt = Date.now() + 1500;
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: {
        template: 'user_created',
        to: 'later@example.org',
        data: { user_name: 'Jo' },
        send_at: new Date(dueAt).toISOString(),
      },
    });
    expect(response.statusCode).toBe(202);
    await waitUntil(() => (sink.messages.length > before ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the scheduled message at the relay, well before the 60 s poll',
    });
    expect(Date.now()).toBeGreaterThanOrEqual(dueAt);
  });

  it(
    'claims once for a batch it was woken for, not again after every message',
    { timeout: 60_000 },
    async () => {
      const before = sink.messages.length;
      const claimsBefore = claims;
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/v1/notifications/batch',
        headers: { authorization: `Bearer ${apiKey}` },
        payload: Array.from({ length: 40 }, (_, i) => ({
          template: 'user_created',
          to: `batch${i}@example.org`,
          data: { user_name: 'Jo' },
        })),
      });
      expect(response.statusCode).toBe(202);
      await waitUntil(() => (sink.messages.length >= before + 40 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the 40 messages at the relay',
      });
      // One wake, one claim of all 40 (and at most a claim or two that races the wake). A claim
      // after each freed lane would be about 40 more.
      expect(claims - claimsBefore).toBeLessThanOrEqual(4);
    },
  );

  it.runIf(backend === 'sqlite')(
    'finds work another process committed without waiting for the poll',
    { timeout: 60_000 },
    async () => {
      const before = sink.messages.length;
      // Another connection to the same file, as a separate api process would be: no wake reaches
      // this idle worker, only the commit.
      const other = await openServices(ctx.config, createLogger('silent'));
      try {
        const project = await other.projects.authenticate(apiKey);
        const accepted = await other.notifications.accept({
          project: project!,
          request: parseSendRequest({ template: 'user_created', to: 'elsewhere@example.org' }),
        });
        expect(accepted.kind).toBe('accepted');
        await waitUntil(() => (sink.messages.length > before ? true : undefined), {
          timeoutMs: 20_000,
          what: 'the message accepted elsewhere, well before the 60 s poll',
        });
        expect(sink.messages.at(-1)?.envelopeTo).toEqual(['elsewhere@example.org']);
      } finally {
        await closeServices(other);
      }
    },
  );

  it.runIf(backend === 'sqlite')(
    'finds work another process committed while its lanes are busy',
    { timeout: 60_000 },
    async () => {
      const other = await openServices(ctx.config, createLogger('silent'));
      try {
        sink.holdRecipient('slow@example.org');
        await send('slow@example.org');
        await waitUntil(() => (sink.heldFor('slow@example.org') === 1 ? true : undefined), {
          what: 'a transaction in flight',
        });
        const before = sink.messages.length;
        const project = await other.projects.authenticate(apiKey);
        const accepted = await other.notifications.accept({
          project: project!,
          request: parseSendRequest({ template: 'user_created', to: 'while-busy@example.org' }),
        });
        expect(accepted.kind).toBe('accepted');
        await waitUntil(() => (sink.messages.length > before ? true : undefined), {
          timeoutMs: 20_000,
          what: 'the message accepted elsewhere while a lane is busy, well before the 60 s poll',
        });
        expect(sink.messages.at(-1)?.envelopeTo).toEqual(['while-busy@example.org']);
        expect(sink.heldFor('slow@example.org')).toBe(1);
      } finally {
        sink.releaseRecipient('slow@example.org');
        await closeServices(other);
      }
    },
  );
});
