import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getStatus, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §2.4 and product.md §3: an API key is shown once; only its SHA-256 hash is stored. */

const TABLES = [
  'projects',
  'templates',
  'smtp_settings',
  'notifications',
  'delivery_attempts',
  'api_logs',
  'quota_usage',
  'idempotency_keys',
  'admins',
  'sessions',
  'settings',
] as const;

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Every value of every row of a table, as text. */
async function tableText(table: string): Promise<string[]> {
  const result = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(
    ctx.services.storage.db,
  );
  return result.rows.flatMap((row) => Object.values(row).map((value) => String(value)));
}

describe('API keys at rest', () => {
  it('are shaped hrl_ + at least 32 base62 characters', async () => {
    const { apiKey } = await seedProject(ctx.services);
    expect(apiKey).toMatch(/^hrl_[0-9A-Za-z]{32,}$/);
  });

  it('are stored only as a SHA-256 hash, not in clear in any column of projects', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const row = await ctx.services.storage.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirstOrThrow();
    expect(row.api_key_hash).toBe(sha256(apiKey));
    for (const value of await tableText('projects')) expect(value).not.toContain(apiKey);
    // Nor the part after the shown prefix, which would be the secret with a few characters cut.
    for (const value of await tableText('projects')) expect(value).not.toContain(apiKey.slice(12));
  });

  it('a rotated key replaces the hash; neither key is stored in clear', async () => {
    const { apiKey: oldKey, projectId } = await seedProject(ctx.services);
    const { apiKey: newKey } = await ctx.services.projects.rotateKey(projectId);
    const row = await ctx.services.storage.db
      .selectFrom('projects')
      .select('api_key_hash')
      .where('id', '=', projectId)
      .executeTakeFirstOrThrow();
    expect(row.api_key_hash).toBe(sha256(newKey));
    const text = await tableText('projects');
    for (const value of text) {
      expect(value).not.toContain(oldKey);
      expect(value).not.toContain(newKey);
    }
  });

  it('appear in no table after the API has been used with them', async () => {
    const { apiKey } = await seedProject(ctx.services, { quotaLimit: 5 });
    const accepted = await send(
      ctx.app,
      apiKey,
      { template: 'user_created', to: 'jane@example.org', data: { user_name: 'Jane' } },
      { 'idempotency-key': 'secret-scan' },
    );
    expect(accepted.statusCode).toBe(202);
    await getStatus(ctx.app, apiKey, accepted.json<{ request_id: string }>().request_id);
    await send(ctx.app, apiKey, { template: '' });
    await ctx.services.apiLogs.flush();
    for (const table of TABLES) {
      for (const value of await tableText(table)) expect(value, table).not.toContain(apiKey);
    }
  });
});
