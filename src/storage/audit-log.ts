import type { Kysely } from 'kysely';
import { insertLogRows, keepNewest } from './log-tables.js';
import type { AuditLogRow, Database, NewAuditLogRow } from './schema.js';
import { newestPage } from './rows.js';

export async function insertAuditLog(db: Kysely<Database>, rows: readonly NewAuditLogRow[]): Promise<void> {
  await insertLogRows(db, 'audit_log', rows);
}

/** Deletes entries older than `before`, then all but the newest `keep`: the API log's retention. */
export async function pruneAuditLog(db: Kysely<Database>, before: number, keep: number): Promise<number> {
  const old = await db.deleteFrom('audit_log').where('created_at', '<', before).executeTakeFirst();
  return Number(old.numDeletedRows) + (await keepNewest(db, 'audit_log', keep));
}

export interface AuditLogFilter {
  readonly tokenId?: number;
  readonly projectId?: number;
  readonly beforeId?: number;
  readonly limit: number;
}

export async function listAuditLog(db: Kysely<Database>, filter: AuditLogFilter): Promise<AuditLogRow[]> {
  return newestPage(db, 'audit_log', { token_id: filter.tokenId, project_id: filter.projectId }, filter);
}
