import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { generateApiKey } from '../../src/domain/api-key.js';
import { openStorage } from '../../src/storage/open.js';
import { createTestContext, testEnv, type TestContext } from '../helpers/services.js';

/**
 * Authentication may be answered from memory (on SQLite), but never after a key changed: not
 * through this process, not through another connection, not while a rotation is in flight.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

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
      expect(await projects.authenticate(apiKey)).toBeNull();
      expect((await projects.authenticate(replacement.key))?.id).toBe(project.id);
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
