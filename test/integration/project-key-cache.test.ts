import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { generateApiKey } from '../../src/domain/api-key.js';
import { ProjectService } from '../../src/services/projects.js';
import { openStorage } from '../../src/storage/open.js';
import type { Storage } from '../../src/storage/storage.js';
import { backend } from '../helpers/database.js';
import { createTestContext, testEnv, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A server process answers authentication from memory, but never after a key changed: not through
 * this process, not through another connection, not while a rotation is in flight. SQLite sees
 * another connection's commit within milliseconds (data_version); PostgreSQL once the change's
 * notice, sent on commit, has arrived (test/postgres/project-changes.test.ts covers the listener
 * itself). A rotation reports success only once every process has seen it.
 */
let ctx: TestContext;
beforeAll(async () => {
  // On PostgreSQL a rotation waits a little over twice the listener's check interval: shortened
  // here, as this suite rotates keys dozens of times.
  ctx = await createTestContext({}, { longRunning: true, servesApi: true, projectChangesCheckMs: 100 });
  if (backend === 'postgres')
    await waitUntil(async () => ((await listening()) ? true : undefined), { what: 'the listener' });
});

/** Whether this database has a connection listening for project changes. */
async function listening(): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and application_name = 'herald project changes'`.execute(
    ctx.services.storage.db,
  );
  return rows[0]!.n > 0;
}
afterAll(() => ctx.close());

/**
 * Projects through a connection of their own, as the CLI or another process has them: its changes
 * wait the settle times that process would.
 */
function anotherConnection(): { other: Storage; otherProjects: ProjectService } {
  const other = openStorage(loadConfig(testEnv(ctx.database)).database, { projectChangesCheckMs: 100 });
  const otherProjects = new ProjectService(
    other.db,
    { limit: null, period: 'month' },
    { changesSettleMs: other.projectChangesSettleMs, updatesSettleMs: other.projectUpdatesSettleMs },
  );
  return { other, otherProjects };
}

describe('authentication after key changes', () => {
  it('refuses a key rotated through this process at once', async () => {
    const { projects } = ctx.services;
    const { project, apiKey } = await projects.create({ name: 'cache-local' });
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    const rotated = await projects.rotateKey(project.id);
    expect(await projects.authenticate(apiKey)).toBeNull();
    expect((await projects.authenticate(rotated.apiKey))?.id).toBe(project.id);
  });

  it('keeps refusing old keys when lookups and rotations interleave', async () => {
    const { projects } = ctx.services;
    const { project, apiKey } = await projects.create({ name: 'cache-race' });
    for (let i = 0; i < 20; i++) {
      const key = i === 0 ? apiKey : (await projects.rotateKey(project.id)).apiKey;
      const [before, rotation] = await Promise.all([
        projects.authenticate(key),
        projects.rotateKey(project.id),
      ]);
      // Whatever the lookup racing the rotation saw, the old key is refused once the rotation is
      // done, and the newest key works.
      expect(before === null || before.id === project.id).toBe(true);
      expect(await projects.authenticate(key)).toBeNull();
      expect((await projects.authenticate(rotation.apiKey))?.id).toBe(project.id);
    }
  });

  it('refuses a key changed through another connection (another process, the CLI)', async () => {
    const { projects } = ctx.services;
    const { project, apiKey } = await projects.create({ name: 'cache-external' });
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    const other = openStorage(loadConfig(testEnv(ctx.database)).database);
    try {
      const replacement = generateApiKey();
      await other.db
        .updateTable('projects')
        .set({ api_key_hash: replacement.hash, api_key_prefix: replacement.prefix })
        .where('id', '=', project.id)
        .execute();
      await waitUntil(async () => ((await projects.authenticate(apiKey)) === null ? true : undefined), {
        timeoutMs: 5_000,
        what: 'the old key to be refused',
      });
      expect((await projects.authenticate(replacement.key))?.id).toBe(project.id);
      // Once refused, never served again.
      expect(await projects.authenticate(apiKey)).toBeNull();
    } finally {
      await other.close();
    }
  });

  it('refuses a key at once when a rotation through another connection has reported success', async () => {
    const { projects } = ctx.services;
    const { other, otherProjects } = anotherConnection();
    try {
      const { project, apiKey } = await projects.create({ name: 'cache-external-rotation' });
      let key = apiKey;
      for (let i = 0; i < 10; i++) {
        // The lookup just before the rotation leaves this process with a fresh answer to reuse.
        expect((await projects.authenticate(key))?.id).toBe(project.id);
        const rotated = await otherProjects.rotateKey(project.id);
        expect(await projects.authenticate(key)).toBeNull();
        expect((await projects.authenticate(rotated.apiKey))?.id).toBe(project.id);
        key = rotated.apiKey;
      }
    } finally {
      await other.close();
    }
  });

  it('serves a quota changed through another connection once the change has reported success', async () => {
    const { projects } = ctx.services;
    const { other, otherProjects } = anotherConnection();
    try {
      const { apiKey } = await projects.create({ name: 'cache-external-quota', quotaLimit: 5 });
      for (let limit = 6; limit < 16; limit++) {
        expect((await projects.authenticate(apiKey))?.quota_limit).toBe(limit - 1);
        await otherProjects.update('cache-external-quota', { quotaLimit: limit });
        // SQLite: at once. PostgreSQL: when the change's notice arrives, within milliseconds.
        if (backend === 'sqlite') expect((await projects.authenticate(apiKey))?.quota_limit).toBe(limit);
        else
          await waitUntil(
            async () => ((await projects.authenticate(apiKey))?.quota_limit === limit ? true : undefined),
            {
              timeoutMs: 5_000,
              what: 'the new quota',
            },
          );
      }
    } finally {
      await other.close();
    }
  });

  it('serves a changed quota at once', async () => {
    const { projects } = ctx.services;
    const { apiKey } = await projects.create({ name: 'cache-quota', quotaLimit: 5 });
    expect((await projects.authenticate(apiKey))?.quota_limit).toBe(5);
    await projects.update('cache-quota', { quotaLimit: 7 });
    expect((await projects.authenticate(apiKey))?.quota_limit).toBe(7);
  });
});
