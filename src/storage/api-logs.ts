import type { Kysely } from 'kysely';
import type { ApiLogRow, Database, NewApiLogRow } from './schema.js';

/**
 * Entries per INSERT. Each carries nine bound parameters; SQLite allows 32,766 per statement and
 * PostgreSQL 65,535, so one statement for a whole backlog (a database locked for a while under a
 * flood of requests) would be refused outright. 1,000 rows are 9,000 parameters on either.
 */
export const API_LOG_ROWS_PER_INSERT = 1000;

/** Inserts the entries in statements of at most API_LOG_ROWS_PER_INSERT rows, in order. */
export async function insertApiLogs(db: Kysely<Database>, rows: readonly NewApiLogRow[]): Promise<void> {
  for (let start = 0; start < rows.length; start += API_LOG_ROWS_PER_INSERT) {
    await db
      .insertInto('api_logs')
      .values(rows.slice(start, start + API_LOG_ROWS_PER_INSERT))
      .execute();
  }
}

/**
 * Deletes entries older than `before`, then keeps at most `keep` entries of authenticated
 * requests and, apart from them, at most `keepUnauthenticated` of requests without a valid key:
 * a flood of anonymous requests can only evict other anonymous entries (product.md §8).
 */
export async function pruneApiLogs(
  db: Kysely<Database>,
  before: number,
  keep: number,
  keepUnauthenticated: number,
): Promise<number> {
  const old = await db.deleteFrom('api_logs').where('created_at', '<', before).executeTakeFirst();
  let excess = 0;
  for (const [authenticated, limit] of [
    [true, keep],
    [false, keepUnauthenticated],
  ] as const) {
    const cutoff = await db
      .selectFrom('api_logs')
      .select('id')
      .where('project_id', authenticated ? 'is not' : 'is', null)
      .orderBy('id', 'desc')
      .offset(limit)
      .limit(1)
      .executeTakeFirst();
    if (cutoff === undefined) continue;
    const deleted = await db
      .deleteFrom('api_logs')
      .where('project_id', authenticated ? 'is not' : 'is', null)
      .where('id', '<=', cutoff.id)
      .executeTakeFirst();
    excess += Number(deleted.numDeletedRows);
  }
  return Number(old.numDeletedRows) + excess;
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
