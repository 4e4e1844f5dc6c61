import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countNotifications, expectError, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * On PostgreSQL a group of accepted requests without Idempotency-Keys or quotas is committed with
 * one statement (the notifications, their usage deltas and their metadata search rows in one
 * data-modifying WITH) and no transaction around it. It must count every message once and,
 * failing, store nothing.
 */
let ctx: TestContext;
let apiKey: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey, projectId } = await seedProject(ctx.services));
});
afterAll(() => ctx.close());

async function queuedUsage(): Promise<number> {
  const { rows } = await sql<{ total: string | null }>`
    SELECT sum(delta) AS total FROM usage_deltas WHERE project_id = ${projectId} AND state = 'queued'
  `.execute(ctx.services.storage.db);
  const { rows: folded } = await sql<{ total: string | null }>`
    SELECT sum(count) AS total FROM usage_counters WHERE project_id = ${projectId} AND state = 'queued'
  `.execute(ctx.services.storage.db);
  return Number(rows[0]?.total ?? 0) + Number(folded[0]?.total ?? 0);
}

function sendMany(count: number, headers: (i: number) => Record<string, string> = () => ({})) {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      send(ctx.app, apiKey, { template: 'user_created', to: `r${i}@example.org`, data: { i } }, headers(i)),
    ),
  );
}

describe('accepting a group with one statement', () => {
  it('stores every message of a concurrent group with its own id and counts each once', async () => {
    const before = await countNotifications(ctx.services, projectId);
    const usageBefore = await queuedUsage();
    const responses = await sendMany(40);
    expect(responses.map((r) => r.statusCode)).toEqual(Array(40).fill(202));
    const bodies = responses.map((r) => r.json<{ id: number; request_id: string }>());
    expect(new Set(bodies.map((b) => b.id)).size).toBe(40);

    const stored = await ctx.services.storage.db
      .selectFrom('notifications')
      .select(['id', 'request_id', 'recipient'])
      .where(
        'request_id',
        'in',
        bodies.map((b) => b.request_id),
      )
      .execute();
    // Each response names the row of its own request: ids matched by request_id, not by order.
    const byRequest = new Map(stored.map((row) => [row.request_id, row]));
    bodies.forEach((body, i) => {
      expect(byRequest.get(body.request_id)?.id).toBe(body.id);
      expect(byRequest.get(body.request_id)?.recipient).toBe(`r${i}@example.org`);
    });
    expect(await countNotifications(ctx.services, projectId)).toBe(before + 40);
    expect(await queuedUsage()).toBe(usageBefore + 40);
  });

  it('stores nothing of a group whose usage cannot be written, and answers 500', async () => {
    const db = ctx.services.storage.db;
    const before = await countNotifications(ctx.services, projectId);
    const usageBefore = await queuedUsage();
    await sql`ALTER TABLE usage_deltas ADD CONSTRAINT refuse_all CHECK (delta < 0) NOT VALID`.execute(db);
    try {
      const responses = await sendMany(5);
      for (const response of responses) expectError(response, 500, 'Failed to queue notification');
    } finally {
      await sql`ALTER TABLE usage_deltas DROP CONSTRAINT refuse_all`.execute(db);
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
    expect(await queuedUsage()).toBe(usageBefore);
  });

  it('commits a group that mixes Idempotency-Keys and plain requests, replaying the keyed ones', async () => {
    const before = await countNotifications(ctx.services, projectId);
    const keyed = (i: number): Record<string, string> =>
      i % 2 === 0 ? { 'idempotency-key': `mixed-${i}` } : {};
    const first = await sendMany(10, keyed);
    expect(first.map((r) => r.statusCode)).toEqual(Array(10).fill(202));
    const again = await sendMany(10, keyed);
    expect(again.map((r) => r.statusCode)).toEqual(Array(10).fill(202));
    for (let i = 0; i < 10; i += 2) expect(again[i]!.json()).toEqual(first[i]!.json());
    // Ten the first time, and the five plain requests again the second.
    expect(await countNotifications(ctx.services, projectId)).toBe(before + 15);
  });

  it("writes each message's metadata search rows in the same statement, and none for a group that fails", async () => {
    const db = ctx.services.storage.db;
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        send(ctx.app, apiKey, {
          template: 'user_created',
          to: `m${i}@example.org`,
          ...(i % 3 !== 0 && { metadata: { order_id: `o-${i}`, batch: 'b-1' } }),
        }),
      ),
    );
    expect(responses.map((r) => r.statusCode)).toEqual(Array(12).fill(202));
    const ids = new Map(responses.map((r, i) => [r.json<{ id: number }>().id, i]));
    const rows = await db
      .selectFrom('notification_metadata')
      .select(['notification_id', 'project_id', 'key', 'value'])
      .where('notification_id', 'in', [...ids.keys()])
      .orderBy('notification_id')
      .orderBy('key')
      .execute();
    expect(
      rows.map((row) => [ids.get(Number(row.notification_id)), Number(row.project_id), row.key, row.value]),
    ).toEqual(
      // In the rows' order: by notification id, which concurrent sends get in any order.
      [...ids.entries()]
        .sort(([a], [b]) => a - b)
        .map(([, i]) => i)
        .filter((i) => i % 3 !== 0)
        .flatMap((i) => [
          [i, projectId, 'batch', 'b-1'],
          [i, projectId, 'order_id', `o-${i}`],
        ]),
    );

    const before = await db
      .selectFrom('notification_metadata')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    await sql`ALTER TABLE notification_metadata ADD CONSTRAINT refuse_all CHECK (key = '') NOT VALID`.execute(
      db,
    );
    try {
      const failed = await send(ctx.app, apiKey, {
        template: 'user_created',
        to: 'x@example.org',
        metadata: { k: 'v' },
      });
      expectError(failed, 500, 'Failed to queue notification');
    } finally {
      await sql`ALTER TABLE notification_metadata DROP CONSTRAINT refuse_all`.execute(db);
    }
    const after = await db
      .selectFrom('notification_metadata')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
    expect(
      await db.selectFrom('notifications').select('id').where('recipient', '=', 'x@example.org').execute(),
    ).toEqual([]);
  });
});
