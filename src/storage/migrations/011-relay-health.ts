import type { Ddl } from './columns.js';

/** Migration 011_relay_health: released, so never edited (a change is a new migration). */
export const relayHealth: Ddl = (t) => [
  // What every worker knows of a relay (host and port), so that workers agree on one being down
  // and a restarted worker remembers it (domain/relay-health.ts): failures in a row, since when it
  // is down, its last failure, and the probe schedule with the lease of the one probe in flight.
  // `version` moves on every change: a worker writes only over the state it decided on.
  `CREATE TABLE relay_health (
      relay TEXT PRIMARY KEY,
      host TEXT NOT NULL,
      port INTEGER NOT NULL,
      tls INTEGER NOT NULL DEFAULT 0,
      trusted INTEGER NOT NULL DEFAULT 0,
      failures INTEGER NOT NULL DEFAULT 0,
      down_since ${t.bigint},
      last_error TEXT,
      probes INTEGER NOT NULL DEFAULT 0,
      probe_at ${t.bigint},
      probe_owner TEXT,
      probe_until ${t.bigint},
      version INTEGER NOT NULL DEFAULT 0,
      updated_at ${t.bigint} NOT NULL
    )`,
  // A project's fallback relay (product.md §10), its password sealed like the primary's.
  `ALTER TABLE smtp_settings ADD COLUMN fallback_host TEXT`,
  `ALTER TABLE smtp_settings ADD COLUMN fallback_port INTEGER`,
  `ALTER TABLE smtp_settings ADD COLUMN fallback_security TEXT`,
  `ALTER TABLE smtp_settings ADD COLUMN fallback_username TEXT`,
  `ALTER TABLE smtp_settings ADD COLUMN fallback_password_enc TEXT`,
  // Which relay an attempt went to: `primary` or `fallback`.
  `ALTER TABLE notifications ADD COLUMN relay TEXT`,
  `ALTER TABLE delivery_attempts ADD COLUMN relay TEXT`,
  // Queued mail whose relay failed or is down names it, so its return makes that mail due at once.
  `ALTER TABLE notifications ADD COLUMN waits_for_relay TEXT`,
  `CREATE INDEX notifications_waits_for_relay ON notifications (waits_for_relay)
      WHERE waits_for_relay IS NOT NULL`,
];
