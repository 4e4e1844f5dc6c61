import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Messages } from '../../src/domain/errors.js';
import { AcceptService } from '../../src/services/accept.js';
import { bearer, countNotifications, expectError, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** product.md §6: POST /api/v1/notifications/batch, all or nothing, in one transaction. */

const BATCH_PATH = '/api/v1/notifications/batch';

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

interface Accepted {
  id: number;
  request_id: string;
  status: string;
  message: string;
}

function sendBatch(
  apiKey: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return ctx.app.inject({
    method: 'POST',
    url: BATCH_PATH,
    headers: { ...bearer(apiKey), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const item = (i: number) => ({
  template: 'user_created',
  to: `user${i}@example.org`,
  data: { user_name: `U${i}` },
});
const items = (n: number, from = 0) => Array.from({ length: n }, (_, i) => item(from + i));

function accepted(response: LightMyRequestResponse): Accepted[] {
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ notifications: Accepted[] }>().notifications;
}

describe('a valid batch', () => {
  it('gets one 202 with a notification per send, in input order, each pollable', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const list = accepted(await sendBatch(apiKey, items(5)));
    expect(list.map((n) => n.status)).toEqual(Array(5).fill('queued'));
    expect(new Set(list.map((n) => n.request_id)).size).toBe(5);
    for (const [i, n] of list.entries()) {
      const status = await ctx.app.inject({
        url: `/api/v1/notifications/${n.request_id}`,
        headers: bearer(apiKey),
      });
      expect(status.json()).toMatchObject({ id: n.id, to: `user${i}@example.org`, status: 'queued' });
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(5);
  });

  it('takes 500 sends at once', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const list = accepted(await sendBatch(apiKey, items(500)));
    expect(list).toHaveLength(500);
    // Input order: the ids were issued in order, so they ascend with the index.
    expect(list.map((n) => n.id)).toEqual([...list.map((n) => n.id)].sort((a, b) => a - b));
    expect(await countNotifications(ctx.services, projectId)).toBe(500);
  });

  it('uses the contact email for a send without `to`, like a single send', async () => {
    const { apiKey } = await seedProject(ctx.services, { contactEmail: 'ops@example.org' });
    const [n] = accepted(await sendBatch(apiKey, [{ template: 'user_created' }]));
    const { notification } = await ctx.services.notifications.detail(n!.request_id);
    expect(notification.recipient).toBe('ops@example.org');
  });
});

describe('a refused batch queues nothing', () => {
  it('names every bad item with the error a single send would get', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const bad = [
      item(0),
      { to: 'a@example.org' },
      item(2),
      { template: 'user_created', to: 'not an address' },
      { template: 'user_created', type: 'sms' },
      { template: 'user_created', to: 'a@example.org', send_at: 'tomorrow' },
      'a string',
    ];
    const response = await sendBatch(apiKey, bad);
    expect(response.statusCode).toBe(400);
    const singles = await Promise.all(
      // `send` passes a string through as the raw body; the item is the JSON string.
      [bad[1], bad[3], bad[4], bad[5], JSON.stringify(bad[6])].map(async (body) =>
        (await send(ctx.app, apiKey, body)).json<{ error: string }>(),
      ),
    );
    expect(response.json()).toEqual({
      error: "Missing or invalid 'template' (item 1)",
      errors: [
        { index: 1, error: singles[0]!.error },
        { index: 3, error: singles[1]!.error },
        { index: 4, error: singles[2]!.error },
        { index: 5, error: singles[3]!.error },
        { index: 6, error: singles[4]!.error },
      ],
    });
    expect(singles.map((s) => s.error)).toEqual([
      Messages.invalidTemplate,
      Messages.invalidRecipient,
      Messages.invalidType,
      Messages.invalidSendAt,
      Messages.invalidTemplate,
    ]);
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('refuses a send without `to` when the project has no contact email', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { contactEmail: null });
    const response = await sendBatch(apiKey, [item(0), { template: 'user_created' }]);
    expect(response.json()).toEqual({
      error: `${Messages.invalidRecipient} (item 1)`,
      errors: [{ index: 1, error: Messages.invalidRecipient }],
    });
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it.each([
    ['an empty array', []],
    ['501 sends', items(501)],
    ['an object', item(0)],
    ['null', null],
  ])('refuses %s', async (_what, body) => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    expectError(await sendBatch(apiKey, body), 400, 'Body must be a JSON array of 1–500 notifications');
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('takes bodies up to 5 MiB and refuses larger ones with 413', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    // Items of about 200 KiB each: every one within a single send's limit.
    const padded = (bytes: number) =>
      Array.from({ length: 25 }, (_, i) => ({
        ...item(i),
        data: { pad: 'x'.repeat(Math.floor(bytes / 25)) },
      }));
    expect(accepted(await sendBatch(apiKey, padded(4.9 * 1024 * 1024)))).toHaveLength(25);
    expectError(await sendBatch(apiKey, padded(5.1 * 1024 * 1024)), 413, 'Request body is larger than 5 MiB');
    expect(await countNotifications(ctx.services, projectId)).toBe(25);
  });

  it('refuses an item larger than a single send could be, even inside 5 MiB', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const big = { ...item(1), data: { pad: 'y'.repeat(300 * 1024) } };
    const response = await sendBatch(apiKey, [item(0), big]);
    expect(response.json()).toEqual({
      error: 'Request body is larger than 256 KiB (item 1)',
      errors: [{ index: 1, error: 'Request body is larger than 256 KiB' }],
    });
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('refuses a body nested 100,000 levels deep in a field it does not know, without failing', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const deep = `[{"template":"user_created","to":"a@example.org","extra":${'['.repeat(100_000)}${']'.repeat(100_000)}}]`;
    const response = await sendBatch(apiKey, deep, { 'idempotency-key': 'deep' });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: "Unknown field 'extra' (item 0)",
      errors: [{ index: 0, error: "Unknown field 'extra'" }],
    });
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('needs the API key', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: BATCH_PATH,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(items(1)),
    });
    expectError(response, 401, Messages.invalidApiKey);
  });
});

describe('quota, all or nothing', () => {
  it('refuses a batch larger than the quota left, and takes one that fits exactly', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 10 });
    accepted(await sendBatch(apiKey, items(4)));
    const refused = await sendBatch(apiKey, items(7));
    expectError(refused, 402, Messages.quotaExceeded);
    expect(refused.headers['x-quota-remaining']).toBe('6');
    expect(refused.headers['retry-after']).toBeDefined();
    // Larger than the whole quota: waiting for the reset cannot help, so no Retry-After.
    const never = await sendBatch(apiKey, items(11));
    expectError(never, 402, Messages.quotaExceeded);
    expect(never.headers['retry-after']).toBeUndefined();
    expect(await countNotifications(ctx.services, projectId)).toBe(4);
    const fits = await sendBatch(apiKey, items(6));
    expect(accepted(fits)).toHaveLength(6);
    expect(fits.headers['x-quota-remaining']).toBe('0');
    expect(await countNotifications(ctx.services, projectId)).toBe(10);
  });

  it('lets exactly one of two batches racing for the last quota through', async () => {
    for (let round = 0; round < 5; round++) {
      const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 10 });
      accepted(await sendBatch(apiKey, items(4)));
      // Two separate accept paths on the same store: their transactions race for the counter row.
      const other = new AcceptService(ctx.services.storage);
      const project = await ctx.services.projects.resolve(projectId);
      const requests = Array.from({ length: 4 }, () => ({
        template: 'user_created',
        to: null,
        data: {},
        type: 'email' as const,
        sendAt: null,
      }));
      const [viaHttp, direct] = await Promise.all([
        sendBatch(apiKey, items(4)),
        other.accept({ project: { ...project, contact_email: 'x@example.org' }, sends: requests }),
      ]);
      const wins = [viaHttp.statusCode === 202, direct.kind === 'accepted'].filter(Boolean).length;
      expect(wins, `round ${round}`).toBe(1);
      expect(await countNotifications(ctx.services, projectId)).toBe(8);
    }
  });
});

describe('Idempotency-Key covers the whole batch', () => {
  it('replays the same batch response and queues nothing more', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const key = { 'idempotency-key': 'batch-1' };
    const first = await sendBatch(apiKey, items(3), key);
    const again = await sendBatch(apiKey, items(3), key);
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(await countNotifications(ctx.services, projectId)).toBe(3);
  });

  it('refuses the key with another body (422), also a single send reusing it', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const key = { 'idempotency-key': 'batch-2' };
    accepted(await sendBatch(apiKey, items(2), key));
    expect((await sendBatch(apiKey, items(3), key)).statusCode).toBe(422);
    expect((await send(ctx.app, apiKey, item(0), key)).statusCode).toBe(422);
  });
});
