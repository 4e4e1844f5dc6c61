import type { Kysely } from 'kysely';
import { insertLogRows, keepNewest } from './log-tables.js';
import type { AuditLogRow, Database, NewAuditLogRow } from './schema.js';

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
  let query = db.selectFrom('audit_log').selectAll();
  if (filter.tokenId !== undefined) query = query.where('token_id', '=', filter.tokenId);
  if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
  if (filter.beforeId !== undefined) query = query.where('id', '<', filter.beforeId);
  return query.orderBy('id', 'desc').limit(filter.limit).execute();
}
