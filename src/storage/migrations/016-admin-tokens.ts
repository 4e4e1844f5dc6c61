import type { Ddl } from './columns.js';

/** Migration 016_admin_tokens: released, so never edited (a change is a new migration). */
export const adminTokens: Ddl = (t) => [
  // Admin tokens of the management API (product.md §13): only a SHA-256 of each is stored. A
  // revoked token is kept (revoked_at) so the audit log can still name it.
  `CREATE TABLE admin_tokens (
      id ${t.id},
      name TEXT NOT NULL,
      token_hash TEXT NOT NULL UNIQUE,
      token_prefix TEXT NOT NULL,
      created_at ${t.bigint} NOT NULL,
      last_used_at ${t.bigint},
      revoked_at ${t.bigint}
    )`,
  // A name says what a token is for; two live tokens never share one, a revoked one frees it.
  `CREATE UNIQUE INDEX admin_tokens_live_name ON admin_tokens (name) WHERE revoked_at IS NULL`,
  // Every call of the management API: who (the token, by id and by the name it had), what, when.
  // No foreign key: the log outlives what it names, and is pruned like the API log.
  `CREATE TABLE audit_log (
      id ${t.id},
      created_at ${t.bigint} NOT NULL,
      token_id ${t.bigint} NOT NULL,
      token_name TEXT NOT NULL,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      status_code INTEGER NOT NULL,
      error TEXT,
      project_id ${t.bigint}
    )`,
  `CREATE INDEX audit_log_created ON audit_log (created_at)`,
  `CREATE INDEX audit_log_token ON audit_log (token_id, id)`,
];
