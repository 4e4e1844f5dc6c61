import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Precompiled } from '../../src/storage/precompiled.js';
import { addProject, backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/**
 * A precompiled statement is built once per dialect, then run with each call's own values, and
 * the constants the builder wrote stay in place.
 */
let fx: StorageFixture;
let projectId: number;
beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());

describe(`precompiled statements (${backend})`, () => {
  it('binds each run’s values to the SQL built once, keeping the constants', async () => {
    let builds = 0;
    const rename = new Precompiled(['id', 'name'] as const, (db, slot) => {
      builds++;
      return db
        .updateTable('projects')
        .set({ from_name: slot('name'), quota_period: 'day' })
        .where('id', '=', slot('id'));
    });
    for (const name of ['First', 'Second', null]) {
      const result = await rename.run(fx.db, { id: projectId, name });
      expect(result.numAffectedRows).toBe(1n);
      const row = await fx.db
        .selectFrom('projects')
        .selectAll()
        .where('id', '=', projectId)
        .executeTakeFirst();
      expect(row).toMatchObject({ from_name: name, quota_period: 'day' });
    }
    expect((await rename.run(fx.db, { id: projectId + 1000, name: 'Nobody' })).numAffectedRows).toBe(0n);
    expect(builds).toBe(1);
  });

  it('refuses a builder that leaves a value without a place', async () => {
    const careless = new Precompiled(['id', 'name'] as const, (db, slot) =>
      db.updateTable('projects').set({ from_name: 'fixed' }).where('id', '=', slot('id')),
    );
    await expect(careless.run(fx.db, { id: projectId, name: 'lost' })).rejects.toThrow(
      'precompiled statement has no place for name',
    );
  });
});
