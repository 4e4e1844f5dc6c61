import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  pruneIdempotencyKeys,
  releaseIdempotencyKey,
} from '../../src/storage/idempotency.js';
import { addProject, backend, openTestStorage, type StorageFixture } from './storage-fixture.js';

/** Idempotency keys: one holder per (project, key), replayable once complete, taken over when expired. */
const NOW = 1_700_000_000_000;
const TTL = 86_400_000;

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

function claim(projectId: number, key: string, fingerprint: string, now = NOW) {
  return claimIdempotencyKey(fx.db, { projectId, key, fingerprint, now, expiresAt: now + TTL });
}

describe(`idempotency keys (${backend})`, () => {
  it('claims a new key, then shows it in flight, then replays the completed response', async () => {
    const projectId = await addProject(fx.db);
    expect(await claim(projectId, 'k1', 'fp-a')).toEqual({ claimed: true });
    expect(await claim(projectId, 'k1', 'fp-a')).toEqual({
      claimed: false,
      existing: { fingerprint: 'fp-a', response: null, responseStatus: null },
    });
    await completeIdempotencyKey(fx.db, projectId, 'k1', 202, '{"request_id":"r1"}');
    expect(await claim(projectId, 'k1', 'fp-b', NOW + 1)).toEqual({
      claimed: false,
      existing: { fingerprint: 'fp-a', response: '{"request_id":"r1"}', responseStatus: 202 },
    });
  });

  it('keeps keys per project', async () => {
    const a = await addProject(fx.db);
    const b = await addProject(fx.db);
    expect(await claim(a, 'shared', 'fp')).toEqual({ claimed: true });
    expect(await claim(b, 'shared', 'fp')).toEqual({ claimed: true });
  });

  it('takes over an expired key, whatever it held', async () => {
    const projectId = await addProject(fx.db);
    await claim(projectId, 'old', 'fp-a');
    await completeIdempotencyKey(fx.db, projectId, 'old', 202, '{"request_id":"r1"}');
    expect((await claim(projectId, 'old', 'fp-b', NOW + TTL - 1)).claimed).toBe(false);
    expect(await claim(projectId, 'old', 'fp-b', NOW + TTL)).toEqual({ claimed: true });
    expect(await claim(projectId, 'old', 'fp-b', NOW + TTL + 1)).toEqual({
      claimed: false,
      existing: { fingerprint: 'fp-b', response: null, responseStatus: null },
    });
  });

  it('frees a released key for the next request', async () => {
    const projectId = await addProject(fx.db);
    await claim(projectId, 'k', 'fp-a');
    await releaseIdempotencyKey(fx.db, projectId, 'k');
    expect(await claim(projectId, 'k', 'fp-b')).toEqual({ claimed: true });
  });

  it('gives a key to exactly one of many concurrent transactions', async () => {
    const projectId = await addProject(fx.db);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        fx.db.transaction().execute((tx) =>
          claimIdempotencyKey(tx, {
            projectId,
            key: 'race',
            fingerprint: `fp-${i}`,
            now: NOW,
            expiresAt: NOW + TTL,
          }),
        ),
      ),
    );
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
  });

  it('prunes expired keys only', async () => {
    const projectId = await addProject(fx.db);
    await fx.db.deleteFrom('idempotency_keys').execute();
    await claim(projectId, 'expired', 'fp', NOW - TTL);
    await claim(projectId, 'live', 'fp', NOW - TTL + 1);
    expect(await pruneIdempotencyKeys(fx.db, NOW)).toBe(1);
    const keys = await fx.db.selectFrom('idempotency_keys').select('key').execute();
    expect(keys.map((k) => k.key)).toEqual(['live']);
  });
});
