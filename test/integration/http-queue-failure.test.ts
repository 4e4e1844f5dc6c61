import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countNotifications, expectError, send, sendOk } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * Spec §7.1: 500 `Failed to queue notification` when the job cannot be enqueued. The store is made
 * to refuse the insert by renaming the notifications table away (the same statement on SQLite and
 * PostgreSQL), then renamed back.
 */

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

async function takeNotificationsTableOffline(): Promise<void> {
  await sql`ALTER TABLE notifications RENAME TO notifications_offline`.execute(ctx.services.storage.db);
}

async function bringNotificationsTableBack(): Promise<void> {
  await sql`ALTER TABLE notifications_offline RENAME TO notifications`.execute(ctx.services.storage.db);
}

const BODY = { template: 'user_created', to: 'jane@example.org' };

describe('500 Failed to queue notification', () => {
  it('when the store cannot commit; nothing of the request is kept and a retry succeeds', async () => {
    // A quota of 1: if the failed request had used quota, the retry below would get 402.
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 1 });

    await takeNotificationsTableOffline();
    try {
      const failed = await send(ctx.app, apiKey, BODY, { 'idempotency-key': 'retry-me' });
      expectError(failed, 500, 'Failed to queue notification');
      // Concurrent requests in the same failing batch all get the same answer.
      const batch = await Promise.all([1, 2, 3].map(() => send(ctx.app, apiKey, BODY)));
      for (const response of batch) expectError(response, 500, 'Failed to queue notification');
    } finally {
      await bringNotificationsTableBack();
    }

    expect(await countNotifications(ctx.services, projectId)).toBe(0);
    // The Idempotency-Key was not burned by the failed attempt: the retry is a fresh acceptance.
    const retry = await send(ctx.app, apiKey, BODY, { 'idempotency-key': 'retry-me' });
    expect(retry.statusCode, retry.body).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.headers['x-quota-remaining']).toBe('0');
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });

  it('validation still runs first while the store is down', async () => {
    const { apiKey } = await seedProject(ctx.services);
    await takeNotificationsTableOffline();
    try {
      expectError(await send(ctx.app, apiKey, { template: '' }), 400, "Missing or invalid 'template'");
      expectError(await send(ctx.app, null, BODY), 401, 'Invalid or missing API key');
    } finally {
      await bringNotificationsTableBack();
    }
    await sendOk(ctx.app, apiKey);
  });
});
