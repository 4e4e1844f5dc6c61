import type { Ddl } from './columns.js';

/** Migration 013_login_attempts: released, so never edited (a change is a new migration). */
export const loginAttempts: Ddl = (t) => [
  // Failed dashboard logins per throttle key (an account from one client, a client, an account),
  // shared by every api process; the key is a SHA-256, so no attempted email is stored.
  `CREATE TABLE login_attempts (
      key TEXT PRIMARY KEY,
      failures INTEGER NOT NULL,
      window_started_at ${t.bigint} NOT NULL,
      updated_at ${t.bigint} NOT NULL
    )`,
  `CREATE INDEX login_attempts_updated ON login_attempts (updated_at)`,
];
