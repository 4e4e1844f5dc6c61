import type { Kysely } from 'kysely';
import { insertLogRows, keepNewest, LOG_ROWS_PER_INSERT } from './log-tables.js';
import type { ApiLogRow, Database, NewApiLogRow } from './schema.js';
import { newestPage } from './rows.js';

/** Entries per INSERT (see log-tables.ts). */
export const API_LOG_ROWS_PER_INSERT = LOG_ROWS_PER_INSERT;

/** Inserts the entries in statements of at most API_LOG_ROWS_PER_INSERT rows, in order. */
export async function insertApiLogs(db: Kysely<Database>, rows: readonly NewApiLogRow[]): Promise<void> {
  await insertLogRows(db, 'api_logs', rows);
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
  const excess =
    (await keepNewest(db, 'api_logs', keep, true)) +
    (await keepNewest(db, 'api_logs', keepUnauthenticated, false));
  return Number(old.numDeletedRows) + excess;
}

export interface ApiLogFilter {
  readonly projectId?: number;
  readonly statusCode?: number;
  readonly beforeId?: number;
  readonly limit: number;
}

export async function listApiLogs(db: Kysely<Database>, filter: ApiLogFilter): Promise<ApiLogRow[]> {
  return newestPage(db, 'api_logs', { project_id: filter.projectId, status_code: filter.statusCode }, filter);
}
