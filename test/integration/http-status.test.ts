import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NotificationsTable } from '../../src/storage/schema.js';
import { SEND_PATH, bearer, expectError, getStatus, sendOk } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §4.2 and product.md §3: GET /api/v1/notifications/{request_id}. */

const NOT_FOUND = 'Notification not found';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

let ctx: TestContext;
let apiKey: string;
let otherKey: string;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey } = await seedProject(ctx.services));
  ({ apiKey: otherKey } = await seedProject(ctx.services));
});
afterAll(() => ctx.close());

/** Moves a notification to another state directly in the store (no worker runs in these tests). */
async function setRow(requestId: string, changes: Partial<Record<keyof NotificationsTable, unknown>>) {
  await ctx.services.storage.db
    .updateTable('notifications')
    .set(changes as never)
    .where('request_id', '=', requestId)
    .execute();
}

function expectIsoUtc(value: unknown): void {
  expect(typeof value).toBe('string');
  expect(value as string).toMatch(ISO_UTC);
  expect(Number.isNaN(Date.parse(value as string))).toBe(false);
}

describe('200 with the status body', () => {
  it('of a queued notification has exactly the documented fields', async () => {
    const sent = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      data: { user_name: 'Jane' },
    });
    const response = await getStatus(ctx.app, apiKey, sent.request_id);
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json\b/);
    const body = response.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual(
      ['attempts', 'created_at', 'id', 'request_id', 'status', 'template', 'to', 'type', 'updated_at'].sort(),
    );
    expect(body).toMatchObject({
      id: sent.id,
      request_id: sent.request_id,
      status: 'queued',
      template: 'user_created',
      to: 'jane@example.org',
      type: 'email',
      attempts: 0,
    });
    expect(Number.isInteger(body.id)).toBe(true);
    expectIsoUtc(body.created_at);
    expectIsoUtc(body.updated_at);
    expect('error_message' in body).toBe(false);
    expect('sent_at' in body).toBe(false);
  });

  it('stores the request timestamps it reports', async () => {
    const sent = await sendOk(ctx.app, apiKey);
    const { notification } = await ctx.services.notifications.detail(sent.request_id);
    const body = (await getStatus(ctx.app, apiKey, sent.request_id)).json<Record<string, string>>();
    expect(Date.parse(body.created_at!)).toBe(notification.created_at);
    expect(Date.parse(body.updated_at!)).toBe(notification.updated_at);
  });

  it('shows a message a worker holds (internal "sending") as queued', async () => {
    const sent = await sendOk(ctx.app, apiKey);
    await setRow(sent.request_id, { state: 'sending', attempts: 1 });
    const body = (await getStatus(ctx.app, apiKey, sent.request_id)).json<Record<string, unknown>>();
    expect(body.status).toBe('queued');
    expect(body.attempts).toBe(1);
    expect('error_message' in body).toBe(false);
    expect('sent_at' in body).toBe(false);
  });

  it('of a sent notification adds sent_at (ISO-8601 UTC) and no error_message', async () => {
    const sent = await sendOk(ctx.app, apiKey);
    const sentAt = Date.UTC(2030, 0, 2, 3, 4, 5, 678);
    await setRow(sent.request_id, {
      state: 'sent',
      attempts: 1,
      sent_at: sentAt,
      updated_at: sentAt,
      transport: 'capture',
    });
    const body = (await getStatus(ctx.app, apiKey, sent.request_id)).json<Record<string, unknown>>();
    expect(body.status).toBe('sent');
    expect(body.sent_at).toBe('2030-01-02T03:04:05.678Z');
    expect(body.updated_at).toBe('2030-01-02T03:04:05.678Z');
    expectIsoUtc(body.sent_at);
    expect('error_message' in body).toBe(false);
  });

  it('of a failed notification adds error_message and no sent_at', async () => {
    const sent = await sendOk(ctx.app, apiKey, { template: 'User_Created', to: 'jane@example.org' });
    await setRow(sent.request_id, { state: 'failed', attempts: 1, error_message: 'Template not found' });
    const body = (await getStatus(ctx.app, apiKey, sent.request_id)).json<Record<string, unknown>>();
    expect(body.status).toBe('failed');
    expect(body.template).toBe('User_Created');
    expect(body.error_message).toBe('Template not found');
    expect('sent_at' in body).toBe(false);
  });
});

describe('a request id in upper case', () => {
  it('finds the notification, as UUIDs are read in either case; another project still gets a 404', async () => {
    const sent = await sendOk(ctx.app, apiKey);
    const upper = sent.request_id.toUpperCase();
    expect(upper).not.toBe(sent.request_id);
    const found = await getStatus(ctx.app, apiKey, upper);
    expect(found.statusCode).toBe(200);
    expect(found.json().request_id).toBe(sent.request_id);
    expectError(await getStatus(ctx.app, otherKey, upper), 404, NOT_FOUND);
  });
});

describe('404 Notification not found', () => {
  it('for request ids that do not exist', async () => {
    for (const id of [randomUUID(), 'abc', 'x'.repeat(100), "'; DROP TABLE notifications; --"]) {
      expectError(await getStatus(ctx.app, apiKey, id), 404, NOT_FOUND);
    }
  });

  it('for the numeric id (the lookup key is the request_id)', async () => {
    const sent = await sendOk(ctx.app, apiKey);
    expectError(await getStatus(ctx.app, apiKey, String(sent.id)), 404, NOT_FOUND);
  });

  it('for request ids longer than any the service issues', async () => {
    for (const length of [101, 500, 2000]) {
      expectError(await getStatus(ctx.app, apiKey, 'a'.repeat(length)), 404, NOT_FOUND);
    }
    // Still behind authentication.
    expectError(await getStatus(ctx.app, null, 'a'.repeat(500)), 401, 'Invalid or missing API key');
  });

  it("for another project's notification: tenants are isolated", async () => {
    const mine = await sendOk(ctx.app, apiKey);
    const theirs = await sendOk(ctx.app, otherKey);
    expectError(await getStatus(ctx.app, otherKey, mine.request_id), 404, NOT_FOUND);
    expectError(await getStatus(ctx.app, apiKey, theirs.request_id), 404, NOT_FOUND);
    // Each owner still sees its own.
    expect((await getStatus(ctx.app, apiKey, mine.request_id)).statusCode).toBe(200);
    expect((await getStatus(ctx.app, otherKey, theirs.request_id)).statusCode).toBe(200);
  });

  it('for a request id with a malformed percent-encoding, in the JSON error shape', async () => {
    const response = await ctx.app.inject({
      method: 'GET',
      url: `${SEND_PATH}/%E0%A4%A`,
      headers: bearer(apiKey),
    });
    expect([400, 404]).toContain(response.statusCode);
    expectError(response, response.statusCode);
  });
});
