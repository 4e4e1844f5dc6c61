import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotaUsed, takeQuota } from '../../src/storage/quota.js';
import { addProject, backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/** Quota counters: atomic under concurrency, per project and per window. */
const WINDOW = Date.UTC(2030, 0, 1);

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

describe(`takeQuota (${backend})`, () => {
  it('counts up from 1 and refuses once the window is used up', async () => {
    const projectId = await addProject(fx.db);
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(0);
    expect(await takeQuota(fx.db, projectId, WINDOW, 3)).toBe(1);
    expect(await takeQuota(fx.db, projectId, WINDOW, 3)).toBe(2);
    expect(await takeQuota(fx.db, projectId, WINDOW, 3)).toBe(3);
    expect(await takeQuota(fx.db, projectId, WINDOW, 3)).toBeNull();
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(3);
  });

  it('refuses everything with a limit of 0', async () => {
    const projectId = await addProject(fx.db);
    expect(await takeQuota(fx.db, projectId, WINDOW, 0)).toBeNull();
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(0);
  });

  it('keeps windows and projects apart', async () => {
    const a = await addProject(fx.db);
    const b = await addProject(fx.db);
    expect(await takeQuota(fx.db, a, WINDOW, 1)).toBe(1);
    expect(await takeQuota(fx.db, a, WINDOW, 1)).toBeNull();
    expect(await takeQuota(fx.db, a, WINDOW + 3_600_000, 1)).toBe(1);
    expect(await takeQuota(fx.db, b, WINDOW, 1)).toBe(1);
  });

  it('gives exactly `limit` units to 50 concurrent transactions', async () => {
    const projectId = await addProject(fx.db);
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        fx.db.transaction().execute((tx) => takeQuota(tx, projectId, WINDOW, 20)),
      ),
    );
    const granted = results.filter((used) => used !== null);
    expect(granted).toHaveLength(20);
    expect([...granted].sort((x, y) => x! - y!)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(20);
  });

  it('gives back nothing taken by a transaction that rolls back', async () => {
    const projectId = await addProject(fx.db);
    await expect(
      fx.db.transaction().execute(async (tx) => {
        await takeQuota(tx, projectId, WINDOW, 5);
        throw new Error('insert failed');
      }),
    ).rejects.toThrow('insert failed');
    expect(await quotaUsed(fx.db, projectId, WINDOW)).toBe(0);
  });
});
