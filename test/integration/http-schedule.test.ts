import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices } from '../../src/compose.js';
import { createWorker } from '../../src/roles.js';
import { Messages } from '../../src/domain/errors.js';
import { parseDateTime } from '../../src/domain/send-request.js';
import { createLogger } from '../../src/logger.js';
import type { StatusBody } from '../../src/services/notifications.js';
import type { Worker } from '../../src/roles.js';
import { bearer, expectError, send, sendOk } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §6: `send_at` (scheduled send), DELETE (cancel) and the status detail of a message
 * waiting for a retry, against a real SMTP server and the real delivery worker.
 */

const DAY = 86_400_000;

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;
let apiKey: string;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_POLL_MS: '20',
    // A message refused once waits here long enough to be looked at.
    HERALD_DELIVERY_RETRY_BASE_MS: '600000',
    HERALD_SMTP_TIMEOUT_MS: '5000',
  });
  worker = createWorker(ctx.services);
  ctx.services.accept.onAccepted(() => worker.wake());
  worker.start();
  ({ apiKey } = await seedProject(ctx.services));
});
afterAll(async () => {
  await worker.stop();
  await ctx.close();
  await sink.stop();
});

async function status(requestId: string, key = apiKey): Promise<StatusBody> {
  const response = await ctx.app.inject({ url: `/api/v1/notifications/${requestId}`, headers: bearer(key) });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<StatusBody>();
}

function cancel(requestId: string, key = apiKey) {
  return ctx.app.inject({
    method: 'DELETE',
    url: `/api/v1/notifications/${requestId}`,
    headers: bearer(key),
  });
}

function delivered(requestId: string): number {
  return sink.messages.filter((m) => m.parsed.headers.get('x-herald-request-id') === requestId).length;
}

const body = (extra: Record<string, unknown> = {}) => ({
  template: 'user_created',
  to: 'jane@example.org',
  data: { user_name: 'Jane' },
  ...extra,
});

describe('send_at', () => {
  it.each([
    ['a time 30 days ahead (less a minute)', () => new Date(Date.now() + 30 * DAY - 60_000).toISOString()],
    ['a time with an offset', () => '2026-01-01T09:00:00+01:00'],
    ['null', () => null],
  ])('accepts %s', async (_what, at) => {
    await sendOk(ctx.app, apiKey, body({ send_at: at() }));
  });

  it.each([
    ['31 days ahead', new Date(Date.now() + 31 * DAY).toISOString()],
    ['a time without an offset', '2026-12-01T09:00:00'],
    ['a date alone', '2026-12-01'],
    ['a day the month does not have', '2026-02-30T09:00:00Z'],
    ['garbage', 'tomorrow at nine'],
    ['a number', 1_800_000_000],
    ['an object', { at: 'now' }],
    ['an hour past 23', '2026-12-01T24:00:00Z'],
  ])('refuses %s with 400 and queues nothing', async (_what, at) => {
    // The worker moves other messages between states meanwhile; the total must not change.
    const total = async () =>
      Object.values(await ctx.services.notifications.counts()).reduce((a, b) => a + b, 0);
    const before = await total();
    expectError(await send(ctx.app, apiKey, body({ send_at: at })), 400, Messages.invalidSendAt);
    expect(await total()).toBe(before);
  });

  it('says what to change: the missing offset, or how far ahead it may be', async () => {
    const local = await send(ctx.app, apiKey, body({ send_at: '2026-12-01T09:00:00' }));
    expect(local.statusCode).toBe(400);
    expect(local.json()).toEqual({
      error: Messages.invalidSendAt,
      hint: 'The time has no offset: add Z for UTC or one like +01:00, e.g. 2026-12-01T09:00:00Z',
    });
    // Each hint's example is a value the API takes.
    for (const [given, hint] of [
      [
        '2026-12-01T09:00',
        'The time has no offset: add Z for UTC or one like +01:00, e.g. 2026-12-01T09:00:00Z',
      ],
      ['2026-12-01 09:00:00+01:00', 'An RFC 3339 date and time, e.g. 2026-12-01T09:00:00+01:00'],
      ['2026-12-01T09:00Z', 'An RFC 3339 date and time, e.g. 2026-12-01T09:00:00Z'],
      // An offset without its colon, as `strftime('%z')` writes it.
      ['2026-12-01T09:00:00+0100', 'An RFC 3339 date and time, e.g. 2026-12-01T09:00:00+01:00'],
      ['2026-12-01 09:00-0530', 'An RFC 3339 date and time, e.g. 2026-12-01T09:00:00-05:30'],
      ['next tuesday', 'An RFC 3339 date and time with an offset, e.g. 2026-12-01T09:00:00+01:00'],
    ]) {
      const refused = await send(ctx.app, apiKey, body({ send_at: given }));
      expect(refused.json(), given).toEqual({ error: Messages.invalidSendAt, hint });
      const example = /e\.g\. (\S+)$/.exec(hint!)![1]!;
      expect(parseDateTime(example), example).not.toBeNull();
    }
    // Written right, but no such day or hour: the hint says so rather than asking for an offset.
    for (const given of ['2026-02-30T10:00:00Z', '2026-11-30T24:00:00+01:00', '2026-11-30T10:00:00+24:00'])
      expect((await send(ctx.app, apiKey, body({ send_at: given }))).json(), given).toEqual({
        error: Messages.invalidSendAt,
        hint: 'No such date or time: a day the month does not have, or an hour, minute or offset out of range',
      });
    const far = await send(ctx.app, apiKey, body({ send_at: new Date(Date.now() + 31 * DAY).toISOString() }));
    expect(far.json()).toEqual({ error: Messages.invalidSendAt, hint: 'It is more than 30 days ahead' });
  });

  it('sends a time already past, or now, at once', async () => {
    for (const at of [new Date(Date.now() - DAY).toISOString(), new Date().toISOString()]) {
      const { request_id } = await sendOk(ctx.app, apiKey, body({ send_at: at }));
      await waitUntil(async () => ((await status(request_id)).status === 'sent' ? true : undefined), {
        what: `the send with send_at ${at} to be sent`,
      });
    }
  });

  it('waits as queued with send_at shown, then is sent, not before its time', async () => {
    const sendAt = Date.now() + 1500;
    const { request_id } = await sendOk(ctx.app, apiKey, body({ send_at: new Date(sendAt).toISOString() }));
    const waiting = await status(request_id);
    expect(waiting).toMatchObject({ status: 'queued', send_at: new Date(sendAt).toISOString(), attempts: 0 });
    const sent = await waitUntil(
      async () => {
        const now = await status(request_id);
        return now.status === 'queued' ? undefined : now;
      },
      { what: 'the scheduled send to be sent' },
    );
    expect(sent.status).toBe('sent');
    expect(sent.send_at).toBeUndefined();
    const sentAt = Date.parse(sent.sent_at!);
    expect(sentAt).toBeGreaterThanOrEqual(sendAt);
    console.info(`scheduled send: sent ${sentAt - sendAt} ms after its send_at`);
  });

  it('survives a restart: another process on the same store sends it when due', async () => {
    const sendAt = Date.now() + 800;
    const { request_id } = await sendOk(ctx.app, apiKey, body({ send_at: new Date(sendAt).toISOString() }));
    await worker.stop();
    try {
      const restarted = await openServices(ctx.config, createLogger('silent'));
      const second = createWorker(restarted);
      second.start();
      try {
        await waitUntil(async () => ((await status(request_id)).status === 'sent' ? true : undefined), {
          what: 'the restarted worker to send the scheduled message',
        });
        expect(delivered(request_id)).toBe(1);
      } finally {
        await second.stop();
        await closeServices(restarted);
      }
    } finally {
      worker = createWorker(ctx.services);
      worker.start();
    }
  });
});

describe('cancel (DELETE /api/v1/notifications/{request_id})', () => {
  it('cancels a scheduled message: 200 with the status body, failed, Canceled; again 409; never sent', async () => {
    const sendAt = Date.now() + 500;
    const { request_id } = await sendOk(ctx.app, apiKey, body({ send_at: new Date(sendAt).toISOString() }));
    const response = await cancel(request_id);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({ request_id, status: 'failed', error_message: 'Canceled' });
    expect(response.json()).not.toHaveProperty('send_at');
    expectError(await cancel(request_id), 409, Messages.notCancelable);
    expect(await status(request_id)).toMatchObject({ status: 'failed', error_message: 'Canceled' });
    // Past its time, the worker still finds nothing to send.
    await waitUntil(() => (Date.now() > sendAt + 300 ? true : undefined), { what: 'the time to pass' });
    await sendOk(ctx.app, apiKey, body()).then(({ request_id: later }) =>
      waitUntil(async () => ((await status(later)).status === 'sent' ? true : undefined), {
        what: 'a later message to pass the worker',
      }),
    );
    expect(delivered(request_id)).toBe(0);
  });

  it('answers 409 for a sent message and for one in an SMTP transaction', async () => {
    const { request_id: sent } = await sendOk(ctx.app, apiKey, body());
    await waitUntil(async () => ((await status(sent)).status === 'sent' ? true : undefined), {
      what: 'sent',
    });
    expectError(await cancel(sent), 409, Messages.notCancelable);

    sink.hold();
    try {
      const { request_id: held } = await sendOk(ctx.app, apiKey, body());
      await waitUntil(() => (sink.waiting > 0 ? true : undefined), { what: 'the transaction to start' });
      expectError(await cancel(held), 409, Messages.notCancelable);
      sink.release();
      await waitUntil(async () => ((await status(held)).status === 'sent' ? true : undefined), {
        what: 'sent',
      });
      expect(delivered(held)).toBe(1);
    } finally {
      sink.release();
    }
  });

  it('takes a DELETE that carries a JSON Content-Type and no body', async () => {
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    const response = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${request_id}`,
      headers: { ...bearer(apiKey), 'content-type': 'application/json' },
    });
    expect(response.statusCode, response.body).toBe(200);
  });

  it("answers 404 for an unknown id and for another project's message", async () => {
    const { apiKey: otherKey } = await seedProject(ctx.services);
    const { request_id } = await sendOk(
      ctx.app,
      apiKey,
      body({ send_at: new Date(Date.now() + DAY).toISOString() }),
    );
    expectError(await cancel(request_id, otherKey), 404, Messages.notificationNotFound);
    expectError(await cancel('no-such-id'), 404, Messages.notificationNotFound);
    expectError(await cancel('x'.repeat(5000)), 404, Messages.notificationNotFound);
    // A NUL cannot be stored in PostgreSQL text: still a 404, on every backend.
    expectError(await cancel('%00'), 404, Messages.notificationNotFound);
    const nul = await ctx.app.inject({ url: '/api/v1/notifications/a%00b', headers: bearer(apiKey) });
    expectError(nul, 404, Messages.notificationNotFound);
    expect((await status(request_id)).status).toBe('queued');
  });

  it('racing the worker, either cancels (never sent) or answers 409 (sent), never both, never neither', async () => {
    type Landed = 'before its time' | 'in the race' | 'after it was sent';
    const rounds: { id: string; landed: Landed; canceled: boolean }[] = [];
    const cancelNow = async (id: string, landed: (answeredAt: number) => Landed) => {
      const response = await cancel(id);
      const answeredAt = Date.now();
      if (response.statusCode === 200)
        expect(response.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
      else expectError(response, 409, Messages.notCancelable);
      rounds.push({ id, landed: landed(answeredAt), canceled: response.statusCode === 200 });
    };
    const scheduled = async (due: number) =>
      (await sendOk(ctx.app, apiKey, body({ send_at: new Date(due).toISOString() }))).request_id;

    // Certainly before: a cancel answered before the message is due was committed before any
    // worker could claim it. (One answered later, on a very slow machine, counts with the race.)
    let lastDue = 0;
    for (let round = 0; round < 5; round++) {
      const due = Date.now() + 1_000;
      lastDue = due;
      await cancelNow(await scheduled(due), (answeredAt) =>
        answeredAt < due ? 'before its time' : 'in the race',
      );
    }
    // The race: due 60 ms from now; the cancel goes out from 20 ms before to 20 ms after that, so
    // it lands before, during or after the worker's claim.
    for (let round = 0; round < 40; round++) {
      const due = Date.now() + 60;
      const id = await scheduled(due);
      const cancelAt = due - 20 + (round % 9) * 5;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, cancelAt - Date.now())));
      await cancelNow(id, () => 'in the race');
    }
    // Certainly after: the message was seen sent before the cancel went out.
    for (let round = 0; round < 5; round++) {
      const { request_id } = await sendOk(ctx.app, apiKey, body());
      await waitUntil(async () => ((await status(request_id)).status === 'sent' ? true : undefined), {
        what: 'a message to be sent before its cancel',
      });
      await cancelNow(request_id, () => 'after it was sent');
    }

    const landed = (when: Landed) => rounds.filter((r) => r.landed === when);
    // Both outcomes happened, each where it had to.
    expect(landed('before its time').length).toBeGreaterThan(0);
    expect(landed('before its time').filter((r) => !r.canceled)).toEqual([]);
    expect(landed('after it was sent')).toHaveLength(5);
    expect(landed('after it was sent').filter((r) => r.canceled)).toEqual([]);

    // Every refused cancel is sent exactly once; every canceled message stays canceled and unsent,
    // once the worker has passed the time the last of them was due.
    const refused = rounds.filter((r) => !r.canceled).map((r) => r.id);
    const canceled = rounds.filter((r) => r.canceled).map((r) => r.id);
    await waitUntil(
      async () => {
        const all = await Promise.all(refused.map((id) => status(id)));
        return all.every((s) => s.status === 'sent') ? true : undefined;
      },
      { what: 'the messages whose cancel was refused to be sent' },
    );
    await waitUntil(() => (Date.now() > lastDue + 300 ? true : undefined), { what: 'the time to pass' });
    const { request_id: later } = await sendOk(ctx.app, apiKey, body());
    await waitUntil(async () => ((await status(later)).status === 'sent' ? true : undefined), {
      what: 'a later message to pass the worker',
    });
    for (const id of refused) expect(delivered(id), id).toBe(1);
    for (const id of canceled) {
      expect(delivered(id), id).toBe(0);
      expect(await status(id)).toMatchObject({ status: 'failed', error_message: 'Canceled', attempts: 0 });
    }
    const race = landed('in the race');
    console.info(
      `cancel race: ${race.filter((r) => r.canceled).length} canceled, ` +
        `${race.filter((r) => !r.canceled).length} refused of ${race.length}`,
    );
  });
});

describe('status detail while waiting for a retry', () => {
  it('shows last_error and next_attempt_at, then neither once sent or failed', async () => {
    sink.failNext = { count: 1, code: 451, message: '4.3.0 Mailbox busy, try later' };
    const { request_id } = await sendOk(ctx.app, apiKey, body());
    const waiting = await waitUntil(
      async () => {
        const now = await status(request_id);
        return now.attempts === 1 && now.last_error !== undefined ? now : undefined;
      },
      { what: 'the first attempt to fail' },
    );
    expect(waiting.status).toBe('queued');
    expect(waiting.last_error).toContain('4.3.0 Mailbox busy');
    const next = Date.parse(waiting.next_attempt_at!);
    expect(next).toBeGreaterThan(Date.parse(waiting.updated_at));
    expect(waiting).not.toHaveProperty('error_message');
    // Canceled while it waits: a failed message has error_message, not the retry detail.
    const canceled = (await cancel(request_id)).json<StatusBody>();
    expect(canceled).toMatchObject({ status: 'failed', error_message: 'Canceled' });
    expect(canceled).not.toHaveProperty('last_error');
    expect(canceled).not.toHaveProperty('next_attempt_at');
  });
});
