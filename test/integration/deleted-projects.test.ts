import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { deleteProjectRow } from '../../src/storage/projects.js';
import { DeletedProjects } from '../../src/worker/deleted-projects.js';
import { addProject, backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/**
 * A worker's view of the projects deleted under the mail it holds: the store is asked only of
 * projects not looked at since projects last may have changed, and a deleted one stays deleted.
 */

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

describe(`DeletedProjects (${backend})`, () => {
  it('asks the store again once projects may have changed, and of projects it has not looked at', async () => {
    const [a, b, c] = [await addProject(fx.db), await addProject(fx.db), await addProject(fx.db)];
    let stamp = 1;
    const deleted = new DeletedProjects(fx.db, () => String(stamp), createLogger('silent'));
    expect(await deleted.look(new Set([a, b]))).toBe(false);

    // Deleted, and nothing told of it: the projects looked at are not asked of again.
    await deleteProjectRow(fx.db, a);
    expect(await deleted.look(new Set([a, b]))).toBe(false);
    // A project not looked at yet is asked of, whatever the stamp.
    await deleteProjectRow(fx.db, c);
    expect(await deleted.look(new Set([b, c]))).toBe(true);
    expect([deleted.has(b), deleted.has(c)]).toEqual([false, true]);

    stamp++;
    expect(await deleted.look(new Set([a, b]))).toBe(true);
    expect([deleted.has(a), deleted.has(b)]).toEqual([true, false]);
    // A deleted project stays so, held or not.
    expect(await deleted.look(new Set([b]))).toBe(false);
    expect(deleted.has(a)).toBe(true);
  });

  it('asks the store at every look where changes cannot be told', async () => {
    const project = await addProject(fx.db);
    const deleted = new DeletedProjects(fx.db, undefined, createLogger('silent'));
    expect(await deleted.look(new Set([project]))).toBe(false);
    await deleteProjectRow(fx.db, project);
    expect(await deleted.look(new Set([project]))).toBe(true);
  });
});
