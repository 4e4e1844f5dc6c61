import type { Kysely } from 'kysely';
import type { ApiLogRow, Database, NewApiLogRow } from './schema.js';

export async function insertApiLogs(db: Kysely<Database>, rows: readonly NewApiLogRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('api_logs')
    .values([...rows])
    .execute();
}

/** Deletes rows older than `before` and, beyond that, all but the newest `keep` rows. */
export async function pruneApiLogs(db: Kysely<Database>, before: number, keep: number): Promise<number> {
  const old = await db.deleteFrom('api_logs').where('created_at', '<', before).executeTakeFirst();
  const cutoff = await db
    .selectFrom('api_logs')
    .select('id')
    .orderBy('id', 'desc')
    .offset(keep)
    .limit(1)
    .executeTakeFirst();
  let excess = 0n;
  if (cutoff !== undefined) {
    excess = (await db.deleteFrom('api_logs').where('id', '<=', cutoff.id).executeTakeFirst()).numDeletedRows;
  }
  return Number(old.numDeletedRows + excess);
}

export interface ApiLogFilter {
  readonly projectId?: number;
  readonly statusCode?: number;
  readonly beforeId?: number;
  readonly limit: number;
}

export async function listApiLogs(db: Kysely<Database>, filter: ApiLogFilter): Promise<ApiLogRow[]> {
  let query = db.selectFrom('api_logs').selectAll();
  if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
  if (filter.statusCode !== undefined) query = query.where('status_code', '=', filter.statusCode);
  if (filter.beforeId !== undefined) query = query.where('id', '<', filter.beforeId);
  return query.orderBy('id', 'desc').limit(filter.limit).execute();
}
