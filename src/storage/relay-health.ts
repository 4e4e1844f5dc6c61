import type { Kysely } from 'kysely';
import { relayBack } from '../domain/lifecycle.js';
import { recovered, type RelayHealth } from '../domain/relay-health.js';
import type { Database, RelayHealthRow } from './schema.js';
import { rowsIn, updateRow } from './rows.js';

/**
 * The relays every worker knows of (domain/relay-health.ts), one row per host and port. A worker
 * reads them all now and then, and changes one by deciding on the row as it read it and writing
 * only while it is still that row (`version`), so of two workers' changes neither is lost.
 */

/** How a probe reaches the relay: no login, implicit TLS where the relay speaks only TLS. */
export interface RelayEndpoint {
  /** `host:port`. */
  readonly relay: string;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  /** The operator's own relay, exempt from the outbound rules. */
  readonly trusted: boolean;
}

export function healthOf(row: RelayHealthRow): RelayHealth {
  return {
    failures: row.failures,
    downSince: row.down_since === null ? null : Number(row.down_since),
    lastError: row.last_error,
    probes: row.probes,
    probeAt: row.probe_at === null ? null : Number(row.probe_at),
  };
}

export function endpointOf(row: RelayHealthRow): RelayEndpoint {
  return {
    relay: row.relay,
    host: row.host,
    port: row.port,
    tls: row.tls === 1,
    trusted: row.trusted === 1,
  };
}

export async function listRelayHealth(db: Kysely<Database>): Promise<RelayHealthRow[]> {
  return db.selectFrom('relay_health').selectAll().orderBy('relay').execute();
}

export async function findRelayHealth(
  db: Kysely<Database>,
  relays: readonly string[],
): Promise<RelayHealthRow[]> {
  return rowsIn(db, 'relay_health', 'relay', relays);
}

/** What a change did: the relay before and after it, and how much waiting mail it made due. */
export interface RelayChange {
  readonly before: RelayHealth;
  readonly row: RelayHealthRow;
  readonly madeDue: number;
}

/**
 * Changes what is known of a relay by `step`, decided on its row as it is now (one is made for a
 * relay never seen). A relay that comes back makes the mail waiting for it due at once, in the
 * same transaction. `releaseProbe` ends the probe lease `owner` holds on it.
 */
export async function changeRelayHealth(
  db: Kysely<Database>,
  endpoint: RelayEndpoint,
  now: number,
  step: (health: RelayHealth) => RelayHealth,
  options: { readonly releaseProbe?: string } = {},
): Promise<RelayChange> {
  return db.transaction().execute(async (tx) => {
    await tx
      .insertInto('relay_health')
      .values({
        relay: endpoint.relay,
        host: endpoint.host,
        port: endpoint.port,
        tls: endpoint.tls ? 1 : 0,
        trusted: endpoint.trusted ? 1 : 0,
        failures: 0,
        probes: 0,
        version: 0,
        updated_at: now,
      })
      .onConflict((oc) => oc.column('relay').doNothing())
      .execute();
    for (;;) {
      const current = await tx
        .selectFrom('relay_health')
        .selectAll()
        .where('relay', '=', endpoint.relay)
        .executeTakeFirstOrThrow();
      const before = healthOf(current);
      const after = step(before);
      const ownsProbe = options.releaseProbe !== undefined && current.probe_owner === options.releaseProbe;
      const row = await tx
        .updateTable('relay_health')
        .set({
          // The latest way to reach it: a relay's TLS or trust follows its settings.
          host: endpoint.host,
          port: endpoint.port,
          tls: endpoint.tls ? 1 : 0,
          trusted: endpoint.trusted ? 1 : 0,
          failures: after.failures,
          down_since: after.downSince,
          last_error: after.lastError,
          probes: after.probes,
          probe_at: after.probeAt,
          ...(ownsProbe && { probe_owner: null, probe_until: null }),
          version: current.version + 1,
          updated_at: now,
        })
        .where('relay', '=', endpoint.relay)
        .where('version', '=', current.version)
        .returningAll()
        .executeTakeFirst();
      // Another worker changed it since it was read: decide again on what it is now.
      if (row === undefined) continue;
      const madeDue = recovered(before, after) ? await makeWaitingMailDue(tx, endpoint.relay, now) : 0;
      return { before, row, madeDue };
    }
  });
}

/** The mail waiting for a relay that is back: due now (lifecycle.ts relayBack). */
async function makeWaitingMailDue(tx: Kysely<Database>, relay: string, now: number): Promise<number> {
  const { changes, requires } = relayBack(now);
  const result = await tx
    .updateTable('notifications')
    .set(changes)
    .where('waits_for_relay', '=', relay)
    .where('state', '=', requires.state)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Takes the lease on a down relay's next probe for `owner` until `until`, if the probe is due and
 * no other worker's probe of it is in flight: one probe at a time across all workers.
 */
export async function claimProbe(
  db: Kysely<Database>,
  relay: string,
  owner: string,
  now: number,
  until: number,
): Promise<boolean> {
  const result = await db
    .updateTable('relay_health')
    .set((eb) => ({ probe_owner: owner, probe_until: until, version: eb('version', '+', 1) }))
    .where('relay', '=', relay)
    .where('down_since', 'is not', null)
    .where('probe_at', '<=', now)
    .where((eb) => eb.or([eb('probe_owner', 'is', null), eb('probe_until', '<', now)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Gives a probe lease back without a verdict (a stopping worker). */
export async function releaseProbe(db: Kysely<Database>, relay: string, owner: string): Promise<void> {
  await updateRow(
    db,
    'relay_health',
    { relay, probe_owner: owner },
    { probe_owner: null, probe_until: null },
  );
}

/**
 * Forgets a relay down since before `downBefore` for which no queued mail waits; false when mail
 * still waits for it, or it came back meanwhile.
 */
export async function forgetRelay(db: Kysely<Database>, relay: string, downBefore: number): Promise<boolean> {
  const result = await db
    .deleteFrom('relay_health')
    .where('relay', '=', relay)
    .where('down_since', '<=', downBefore)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('notifications')
            .select('id')
            .where('waits_for_relay', '=', relay)
            .where('state', '=', 'queued'),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
