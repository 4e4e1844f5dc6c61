import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { insertApiLogs, listApiLogs, pruneApiLogs } from '../../src/storage/api-logs.js';
import type { NewApiLogRow } from '../../src/storage/schema.js';
import { addProject, backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/** API logs: batch inserts, newest-first listing, pruning by age and by row count. */
const DAY = 86_400_000;
const NOW = 1_700_000_000_000;

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());
beforeEach(async () => {
  await fx.db.deleteFrom('api_logs').execute();
});

function entry(createdAt: number, overrides: Partial<NewApiLogRow> = {}): NewApiLogRow {
  return {
    created_at: createdAt,
    method: 'POST',
    path: '/api/v1/notifications',
    status_code: 202,
    error: null,
    latency_ms: 1.5,
    key_prefix: 'hrl_abcd',
    project_id: null,
    request_id: null,
    ...overrides,
  };
}

async function createdAts(): Promise<number[]> {
  const rows = await fx.db.selectFrom('api_logs').select('created_at').orderBy('id').execute();
  return rows.map((row) => row.created_at);
}

describe(`api logs (${backend})`, () => {
  it('inserts a batch and lists it newest first, filtered', async () => {
    await insertApiLogs(fx.db, []);
    await insertApiLogs(fx.db, [
      entry(NOW, { project_id: 1 }),
      entry(NOW + 1, { project_id: 2, status_code: 401, error: 'Invalid or missing API key' }),
      entry(NOW + 2, { project_id: 1, status_code: 402 }),
    ]);
    const all = await listApiLogs(fx.db, { limit: 10 });
    expect(all.map((row) => row.created_at)).toEqual([NOW + 2, NOW + 1, NOW]);
    expect(all[1]).toMatchObject({ status_code: 401, error: 'Invalid or missing API key', latency_ms: 1.5 });
    expect((await listApiLogs(fx.db, { projectId: 1, limit: 10 })).length).toBe(2);
    expect((await listApiLogs(fx.db, { statusCode: 401, limit: 10 })).length).toBe(1);
    const page = await listApiLogs(fx.db, { limit: 2 });
    const next = await listApiLogs(fx.db, { beforeId: page[1]!.id, limit: 2 });
    expect(next.map((row) => row.created_at)).toEqual([NOW]);
  });

  it('prunes rows older than the retention', async () => {
    await insertApiLogs(fx.db, [entry(NOW - 31 * DAY), entry(NOW - 30 * DAY), entry(NOW - DAY), entry(NOW)]);
    expect(await pruneApiLogs(fx.db, NOW - 30 * DAY, 1000, 1000)).toBe(1);
    expect(await createdAts()).toEqual([NOW - 30 * DAY, NOW - DAY, NOW]);
  });

  it('keeps only the newest rows beyond the row cap', async () => {
    await insertApiLogs(
      fx.db,
      Array.from({ length: 30 }, (_, i) => entry(NOW + i)),
    );
    expect(await pruneApiLogs(fx.db, 0, 1000, 10)).toBe(20);
    expect(await createdAts()).toEqual(Array.from({ length: 10 }, (_, i) => NOW + 20 + i));
    expect(await pruneApiLogs(fx.db, 0, 1000, 10)).toBe(0);
  });

  it('applies both limits in one pass', async () => {
    await insertApiLogs(fx.db, [
      ...Array.from({ length: 5 }, (_, i) => entry(NOW - 40 * DAY + i)),
      ...Array.from({ length: 8 }, (_, i) => entry(NOW + i)),
    ]);
    expect(await pruneApiLogs(fx.db, NOW - 30 * DAY, 1000, 6)).toBe(7);
    expect(await createdAts()).toEqual(Array.from({ length: 6 }, (_, i) => NOW + 2 + i));
  });

  it('keeps authenticated and unauthenticated entries apart: a flood of one never evicts the other', async () => {
    await fx.db.deleteFrom('api_logs').execute();
    const projectId = await addProject(fx.db);
    const real = Array.from({ length: 5 }, (_, i) => entry(NOW + i, { project_id: projectId }));
    const flood = Array.from({ length: 1500 }, (_, i) =>
      entry(NOW + 10 + i, { status_code: 401, error: 'Invalid or missing API key' }),
    );
    await insertApiLogs(fx.db, real);
    await insertApiLogs(fx.db, flood);
    expect(await pruneApiLogs(fx.db, 0, 10, 100)).toBe(1400);
    const kept = await fx.db.selectFrom('api_logs').select(['project_id']).execute();
    expect(kept.filter((row) => row.project_id === projectId)).toHaveLength(5);
    expect(kept.filter((row) => row.project_id === null)).toHaveLength(100);
  });
});
