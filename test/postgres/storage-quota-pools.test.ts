import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotaUsed, takeQuota } from '../../src/storage/quota.js';
import { addProject, openTestStorage, type StorageFixture } from '../integration/storage-fixture.js';

/**
 * Quota across processes: separate connection pools, as separate api processes have, share one
 * counter exactly. PostgreSQL only: several SQLite connections in one process would block each
 * other's synchronous writes, and across processes SQLite's single writer is covered by the
 * multi-process tests.
 */
const WINDOW = Date.UTC(2030, 0, 1);

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

describe('takeQuota across processes (postgres)', () => {
  it('shares one counter between connection pools of separate processes', async () => {
    const projectId = await addProject(fx.db);
    const pools = [fx.storage, await fx.openAnother(), await fx.openAnother()];
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        pools[i % pools.length]!.db.transaction().execute((tx) => takeQuota(tx, projectId, WINDOW, 25)),
      ),
    );
    expect(results.filter((used) => used !== null)).toHaveLength(25);
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(25);
  });
});
