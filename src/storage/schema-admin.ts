import type { Generated, Insertable, Selectable } from 'kysely';

/** The management API's tables (migration 016), part of `Database` in schema.ts. */

export interface AdminTokensTable {
  id: Generated<number>;
  /** What the token is for; unique among tokens not revoked. */
  name: string;
  /** SHA-256 of the token; the token itself is shown once, at creation. */
  token_hash: string;
  /** `hrla_` and 8 characters, to tell tokens apart. */
  token_prefix: string;
  created_at: number;
  /** Moved at most once a minute by the calls made with it. */
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface AuditLogTable {
  id: Generated<number>;
  created_at: number;
  token_id: number;
  /** The token's name when the call was made. */
  token_name: string;
  method: string;
  path: string;
  status_code: number;
  error: string | null;
  /** The project the call was about, once its path named one that exists. */
  project_id: number | null;
}

export type AdminTokenRow = Selectable<AdminTokensTable>;
export type AuditLogRow = Selectable<AuditLogTable>;
export type NewAuditLogRow = Insertable<AuditLogTable>;
