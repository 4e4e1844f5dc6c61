import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addLoginFailure,
  clearLoginFailures,
  loginFailures,
  pruneLoginFailures,
} from '../../src/storage/login-attempts.js';
import { backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/** Failed dashboard logins as every api process shares them (migration 013_login_attempts). */

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

const WINDOW = 1000;

describe(`login attempts (${backend})`, () => {
  it('counts failures per key in a fixed window, from every connection at once', async () => {
    const other = await fx.openAnother();
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        addLoginFailure(i % 2 === 0 ? fx.db : other.db, ['k1', 'k2'], 100, 0),
      ),
    );
    expect(await loginFailures(fx.db, ['k1', 'k2', 'k3'], 0)).toEqual(
      expect.arrayContaining([
        { key: 'k1', failures: 20, windowStartedAt: 100 },
        { key: 'k2', failures: 20, windowStartedAt: 100 },
      ]),
    );
    // A window that started before the current one's start is over: counting starts again.
    await addLoginFailure(fx.db, ['k1'], 100 + WINDOW + 1, 101);
    expect(await loginFailures(fx.db, ['k1'], 101)).toEqual([
      { key: 'k1', failures: 1, windowStartedAt: 100 + WINDOW + 1 },
    ]);
    expect(await loginFailures(fx.db, ['k2'], 101)).toEqual([]);
    await clearLoginFailures(fx.db, ['k1']);
    expect(await loginFailures(fx.db, ['k1'], 0)).toEqual([]);
  });

  it('stays bounded: expired keys go, then the least recently failed beyond the cap', async () => {
    for (let i = 0; i < 30; i++) await addLoginFailure(fx.db, [`cap-${i}`], 10_000 + i, 9_000);
    const pruned = await pruneLoginFailures(fx.db, 9_000, 10);
    // k2 (window at 100) had expired; of the thirty, the ten most recent stay.
    expect(pruned).toBe(21);
    const left = await fx.db.selectFrom('login_attempts').select('key').orderBy('key').execute();
    expect(left.map((row) => row.key)).toEqual(Array.from({ length: 10 }, (_, i) => `cap-${20 + i}`).sort());
  });
});
