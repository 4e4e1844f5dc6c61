import type { Ddl } from './columns.js';

/** Migration 017_inbound_reports: released, so never edited (a change is a new migration). */
export const inboundReports: Ddl = (t) => [
  // Every report read from the bounce listener or the IMAP mailbox, by a fingerprint of its bytes
  // (and, from the listener, its envelope recipients). A reader claims the row before it parses;
  // the row becomes `done` in the transaction that applies the report, so a copy read again (a
  // second worker on the same mailbox, a move that failed after the apply, an MTA that resends
  // after a lost reply) is never applied twice.
  `CREATE TABLE inbound_reports (
      fingerprint TEXT PRIMARY KEY,
      state TEXT NOT NULL,
      owner TEXT NOT NULL,
      claimed_until ${t.bigint} NOT NULL,
      outcome TEXT,
      created_at ${t.bigint} NOT NULL
    )`,
  `CREATE INDEX inbound_reports_created ON inbound_reports (created_at)`,
];
