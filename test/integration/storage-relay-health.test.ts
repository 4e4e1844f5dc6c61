import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterAttempt, HEALTHY, relayHealthPolicy, type RelayHealth } from '../../src/domain/relay-health.js';
import {
  changeRelayHealth,
  claimProbe,
  forgetRelay,
  healthOf,
  listRelayHealth,
  releaseProbe,
  type RelayEndpoint,
} from '../../src/storage/relay-health.js';
import type { Storage } from '../../src/storage/storage.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * What workers know of relays, in the database (storage/relay-health.ts): two workers' changes to
 * one relay are both kept, one probe at a time holds a relay's lease, a relay that comes back makes
 * the mail waiting for it due in the same transaction, and a relay nobody needs is forgotten.
 */

const policy = relayHealthPolicy({ retryBaseMs: 30_000 });
let fx: StorageFixture;
let other: Storage;
let n = 0;

beforeAll(async () => {
  fx = await openTestStorage();
  other = await fx.openAnother();
});
afterAll(() => fx?.close());

function endpoint(): RelayEndpoint {
  n++;
  return { relay: `relay${n}.example:25`, host: `relay${n}.example`, port: 25, tls: false, trusted: false };
}

const failure = (health: RelayHealth, at: number) =>
  afterAttempt(health, { contact: 'unreachable', error: `failure at ${at}`, alone: true }, at, policy);

describe(`relay health (${backend})`, () => {
  it('keeps the failures of two workers that report at once', async () => {
    const relay = endpoint();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        changeRelayHealth(i % 2 ? fx.db : other.db, relay, 1000 + i, (h) => failure(h, 1000 + i)),
      ),
    );
    const [row] = (await listRelayHealth(fx.db)).filter((r) => r.relay === relay.relay);
    expect(healthOf(row!)).toMatchObject({ failures: 10 });
    expect(healthOf(row!).downSince).not.toBeNull();
    expect(row).toMatchObject({ host: relay.host, port: 25, tls: 0, trusted: 0 });
  });

  it('lets one worker at a time take the lease of a due probe', async () => {
    const relay = endpoint();
    await changeRelayHealth(fx.db, relay, 1000, () => ({
      ...HEALTHY,
      failures: 3,
      downSince: 1000,
      probeAt: 2000,
    }));
    expect(await claimProbe(fx.db, relay.relay, 'w1', 1999, 9000)).toBe(false);
    const claims = await Promise.all([
      claimProbe(fx.db, relay.relay, 'w1', 2000, 9000),
      claimProbe(other.db, relay.relay, 'w2', 2000, 9000),
    ]);
    expect(claims.filter(Boolean)).toHaveLength(1);
    const owner = claims[0] ? 'w1' : 'w2';
    // Held until it ends or its lease runs out.
    expect(await claimProbe(fx.db, relay.relay, 'w3', 8999, 20000)).toBe(false);
    expect(await claimProbe(fx.db, relay.relay, 'w3', 9001, 20000)).toBe(true);
    await releaseProbe(fx.db, relay.relay, owner);
    await releaseProbe(fx.db, relay.relay, 'w3');
    // A verdict ends the lease of the worker that probed.
    expect(await claimProbe(fx.db, relay.relay, 'w4', 9002, 20000)).toBe(true);
    const change = await changeRelayHealth(fx.db, relay, 9500, (h) => ({ ...h, probes: 1, probeAt: 19500 }), {
      releaseProbe: 'w4',
    });
    expect(change.row).toMatchObject({ probe_owner: null, probe_until: null, probes: 1 });
  });

  it('makes the mail waiting for a relay due in the transaction that finds it back', async () => {
    const relay = endpoint();
    const projectId = await addProject(fx.db);
    const waits = { state: 'queued' as const, attempts: 1, run_at: 900_000, waits_for_relay: relay.relay };
    const waiting = await addNotification(fx.db, projectId, waits);
    const elsewhere = await addNotification(fx.db, projectId, {
      ...waits,
      waits_for_relay: 'other.example:25',
    });
    const failed = await addNotification(fx.db, projectId, { ...waits, state: 'failed' });
    await changeRelayHealth(fx.db, relay, 1000, () => ({
      ...HEALTHY,
      failures: 3,
      downSince: 1000,
      probeAt: 2000,
    }));
    const back = await changeRelayHealth(fx.db, relay, 5000, () => HEALTHY);
    expect(back.madeDue).toBe(1);
    expect(await notification(fx.db, waiting)).toMatchObject({ run_at: 5000, waits_for_relay: null });
    expect(await notification(fx.db, elsewhere)).toMatchObject({ run_at: 900_000 });
    expect(await notification(fx.db, failed)).toMatchObject({ run_at: 900_000 });
  });

  it('forgets a relay long down only when no mail waits for it', async () => {
    const relay = endpoint();
    const projectId = await addProject(fx.db);
    await changeRelayHealth(fx.db, relay, 1000, () => ({
      ...HEALTHY,
      failures: 3,
      downSince: 1000,
      probeAt: 2000,
    }));
    const waiting = await addNotification(fx.db, projectId, {
      state: 'queued',
      waits_for_relay: relay.relay,
    });
    expect(await forgetRelay(fx.db, relay.relay, 999)).toBe(false);
    expect(await forgetRelay(fx.db, relay.relay, 1000)).toBe(false);
    await fx.db.updateTable('notifications').set({ state: 'failed' }).where('id', '=', waiting).execute();
    expect(await forgetRelay(fx.db, relay.relay, 1000)).toBe(true);
    expect((await listRelayHealth(fx.db)).map((r) => r.relay)).not.toContain(relay.relay);
  });
});
