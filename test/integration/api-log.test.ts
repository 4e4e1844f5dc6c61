import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminTokenPrefix, generateAdminToken } from '../../src/domain/admin-token.js';
import { generateApiKey } from '../../src/domain/api-key.js';
import { createJanitor } from '../../src/roles.js';
import { createLogger } from '../../src/logger.js';
import { ApiLogService } from '../../src/services/api-log.js';
import type { ApiLogRow, NewApiLogRow } from '../../src/storage/schema.js';
import { adminClient, clientWith } from '../helpers/admin.js';
import { SEND_PATH, expectError, getStatus, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/** product.md §4: the API log records time, method, path, status, error, latency and key prefix. */

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

/** All rows, oldest first, once the buffered entries are written. */
async function logRows(): Promise<ApiLogRow[]> {
  await ctx.services.apiLogs.flush();
  return (await ctx.services.apiLogs.list({ limit: 50 })).reverse();
}

/**
 * The rows after the first `skip`, once at least `count` of them are written: an entry is recorded
 * when its response has been sent, which need not be before `inject` resolves. Callers assert the
 * exact number, so a request logged twice still fails.
 */
async function newRows(skip: number, count: number): Promise<ApiLogRow[]> {
  const rows = await waitUntil(
    async () => {
      const all = (await logRows()).slice(skip);
      return all.length >= count ? all : undefined;
    },
    { what: `${count} API log rows` },
  );
  return rows;
}

describe('API log', () => {
  it('has one row per request with what the dashboard shows, and never the whole key', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const before = (await logRows()).length;
    const wrongKey = generateApiKey().key;
    const unknownId = randomUUID();

    const accepted = await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org' });
    expect(accepted.statusCode).toBe(202);
    const { request_id } = accepted.json<{ request_id: string }>();
    expectError(
      await send(ctx.app, wrongKey, { template: 'user_created', to: 'jane@example.org' }),
      401,
      'Invalid or missing API key',
    );
    expectError(await getStatus(ctx.app, apiKey, unknownId), 404, 'Notification not found');

    const rows = await newRows(before, 3);
    expect(rows).toHaveLength(3);
    const [send202, send401, lookup404] = rows as [ApiLogRow, ApiLogRow, ApiLogRow];

    expect(send202).toMatchObject({
      method: 'POST',
      path: SEND_PATH,
      status_code: 202,
      error: null,
      key_prefix: apiKey.slice(0, 12),
      project_id: projectId,
      request_id,
    });
    expect(send401).toMatchObject({
      method: 'POST',
      path: SEND_PATH,
      status_code: 401,
      error: 'Invalid or missing API key',
      key_prefix: wrongKey.slice(0, 12),
      project_id: null,
    });
    expect(lookup404).toMatchObject({
      method: 'GET',
      path: `${SEND_PATH}/${unknownId}`,
      status_code: 404,
      error: 'Notification not found',
      key_prefix: apiKey.slice(0, 12),
      project_id: projectId,
    });
    for (const row of rows) {
      expect(typeof row.latency_ms).toBe('number');
      expect(row.latency_ms).toBeGreaterThanOrEqual(0);
      expect(row.created_at).toBeGreaterThan(0);
      const text = JSON.stringify(row);
      expect(text).not.toContain(apiKey);
      expect(text).not.toContain(wrongKey);
    }
  });

  it("keeps nothing of a bearer string that is not one of Herald's keys, and an admin token's shown part", async () => {
    const before = (await logRows()).length;
    const foreign = 'sk_live_51Hx9ExampleSecretOfAnotherService';
    const mistyped = `${generateApiKey().key.slice(0, -1)}!`;
    const admin = generateAdminToken().key;
    for (const token of [foreign, mistyped, admin])
      expectError(
        await send(ctx.app, token, { template: 'user_created', to: 'jane@example.org' }),
        401,
        'Invalid or missing API key',
      );
    const rows = await newRows(before, 3);
    expect(rows.map((row) => row.key_prefix)).toEqual([null, null, adminTokenPrefix(admin)]);
    expect(adminTokenPrefix(admin)).toBe(admin.slice(0, 13));
    expect(JSON.stringify(rows)).not.toContain('sk_live');
  });

  it('keeps the same on the management API: the shown part of a token or key, nothing of anything else', async () => {
    const before = (await logRows()).length;
    const unknownAdmin = generateAdminToken().key;
    const projectKey = generateApiKey().key;
    const admin = await adminClient(ctx.app, ctx.services);
    for (const token of ['sk_live_51Hx9ExampleSecretOfAnotherService', unknownAdmin, projectKey])
      expect((await clientWith(ctx.app, token).get('/projects')).statusCode).toBe(401);
    expect((await admin.get('/projects')).statusCode).toBe(200);
    const rows = await newRows(before, 4);
    expect(rows.map((row) => row.key_prefix)).toEqual([
      null,
      adminTokenPrefix(unknownAdmin),
      projectKey.slice(0, 12),
      adminTokenPrefix(admin.token),
    ]);
    expect(JSON.stringify(rows)).not.toContain('sk_live');
  });

  it('logs the path without its query string, so a key put there is not stored', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const before = (await logRows()).length;
    const response = await ctx.app.inject({
      method: 'POST',
      url: `${SEND_PATH}?api_key=${apiKey}&x=1`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ template: 'user_created', to: 'jane@example.org' }),
    });
    expectError(response, 401, 'Invalid or missing API key');
    const rows = await newRows(before, 1);
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.path).toBe(SEND_PATH);
    expect(row.key_prefix).toBeNull();
    expect(JSON.stringify(rows)).not.toContain(apiKey);
  });

  it('records the error text of other refusals (400, 402, 405, 413, 415)', async () => {
    const { apiKey } = await seedProject(ctx.services, { quotaLimit: 0 });
    const before = (await logRows()).length;
    await send(ctx.app, apiKey, { template: '' });
    await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org' });
    await ctx.app.inject({
      method: 'DELETE',
      url: SEND_PATH,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    await send(ctx.app, apiKey, { data: 'x'.repeat(300 * 1024) });
    await send(ctx.app, apiKey, 'hello', { 'content-type': 'text/plain' });
    const rows = await newRows(before, 5);
    expect(rows.map((r) => r.status_code)).toEqual([400, 402, 405, 413, 415]);
    expect(rows[0]!.error).toBe("Missing or invalid 'template'");
    expect(rows[1]!.error).toBe('Request quota exceeded');
    for (const row of rows) {
      expect(typeof row.error).toBe('string');
      expect(row.error!.length).toBeGreaterThan(0);
    }
    expect(JSON.stringify(rows)).not.toContain(apiKey);
  });
});

describe('API log under an unauthenticated flood', () => {
  it('keeps every authenticated entry when 1,500 requests without a key arrive', async () => {
    const flood = await createTestContext({ HERALD_API_LOG_MAX_ROWS: '1000' });
    try {
      const { apiKey, projectId } = await seedProject(flood.services);
      for (let i = 0; i < 5; i++)
        expect(
          (await send(flood.app, apiKey, { template: 'user_created', to: 'jane@example.org' })).statusCode,
        ).toBe(202);
      for (let i = 0; i < 1500; i++)
        expect((await getStatus(flood.app, null, randomUUID())).statusCode).toBe(401);
      await flood.services.apiLogs.flush();
      await createJanitor(flood.services).runOnce();
      const rows = await flood.services.apiLogs.list({ limit: 5000 });
      expect(rows.filter((row) => row.project_id === projectId)).toHaveLength(5);
      // The requests without a key kept a budget of their own: a tenth of the authenticated one.
      expect(rows.filter((row) => row.project_id === null)).toHaveLength(100);
    } finally {
      await flood.close();
    }
  });
});

describe('API log when the store refuses writes', () => {
  const entry = (i: number, projectId: number | null, tag = 'outage'): NewApiLogRow => ({
    created_at: Date.now(),
    method: 'GET',
    path: `/api/v1/notifications/${tag}-${i}`,
    status_code: projectId === null ? 401 : 404,
    error: null,
    latency_ms: 1,
    key_prefix: null,
    project_id: projectId,
    request_id: null,
  });
  const outage = sql`alter table api_logs rename to api_logs_away`;
  const recovery = sql`alter table api_logs_away rename to api_logs`;
  const count = async () =>
    Number(
      (
        await sql<{
          n: number | string;
        }>`select count(*) as n from api_logs where path like '/api/v1/notifications/outage-%'`.execute(
          ctx.services.storage.db,
        )
      ).rows[0]!.n,
    );

  it('writes a backlog larger than one statement may carry once the store is back', async () => {
    // 8,000 entries of nine parameters each are past SQLite's 32,766 and PostgreSQL's 65,535.
    const logs = new ApiLogService(ctx.services.storage.db, createLogger('silent'), { retryMs: 20 });
    await outage.execute(ctx.services.storage.db);
    try {
      for (let i = 0; i < 8000; i++) logs.record(entry(i, null));
      await logs.flush();
      expect(logs.buffered).toBe(8000);
    } finally {
      await recovery.execute(ctx.services.storage.db);
    }
    await waitUntil(() => (logs.buffered === 0 ? true : undefined), { what: 'the backlog written' });
    expect(await count()).toBe(8000);
    // And it goes on writing.
    logs.record(entry(8000, null));
    await logs.flush();
    expect(await count()).toBe(8001);
  });

  it('holds at most its bound meanwhile, dropping the oldest unauthenticated entries first', async () => {
    const { projectId } = await seedProject(ctx.services);
    const dropped: string[] = [];
    const logs = new ApiLogService(ctx.services.storage.db, createLogger('silent'), {
      batchSize: 50,
      maxBuffered: 200,
      retryMs: 20,
      onDrop: (kind) => dropped.push(kind),
    });
    await outage.execute(ctx.services.storage.db);
    try {
      for (let i = 0; i < 300; i++) logs.record(entry(i, i % 3 === 0 ? projectId : null, 'bound'));
      await logs.flush();
      expect(logs.buffered).toBe(200);
    } finally {
      await recovery.execute(ctx.services.storage.db);
    }
    await waitUntil(() => (logs.buffered === 0 ? true : undefined), { what: 'the buffer written' });
    // 100 authenticated and 200 unauthenticated arrived; 100 of the latter had to go.
    expect(dropped).toEqual(Array.from({ length: 100 }, () => 'unauthenticated'));
    const kept = await ctx.services.apiLogs.list({ limit: 20_000 });
    const ours = kept.filter((row) => row.path.startsWith('/api/v1/notifications/bound-'));
    expect(ours.filter((row) => row.project_id === projectId)).toHaveLength(100);
    const unauthenticated = ours
      .filter((row) => row.project_id === null)
      .map((row) => Number(row.path.split('-')[1]))
      .sort((a, b) => a - b);
    // The newest 100 of them stayed.
    expect(unauthenticated).toHaveLength(100);
    expect(unauthenticated[0]).toBeGreaterThan(140);
  });
});
