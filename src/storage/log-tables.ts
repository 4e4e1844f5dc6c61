import type { Insertable, Kysely } from 'kysely';
import type { Database } from './schema.js';
import { insertInChunks } from './rows.js';

/**
 * What the append-only logs (the API log, the audit log) share: batched inserts in statements of
 * bounded size, and keeping only the newest rows.
 */
type LogTable = 'api_logs' | 'audit_log';

/**
 * Entries per INSERT. Each carries up to nine bound parameters; SQLite allows 32,766 per statement
 * and PostgreSQL 65,535, so one statement for a whole backlog (a database locked for a while under
 * a flood of requests) would be refused outright. 1,000 rows are 9,000 parameters on either.
 */
export const LOG_ROWS_PER_INSERT = 1000;

/** Inserts the entries in statements of at most LOG_ROWS_PER_INSERT rows, in order. */
export async function insertLogRows<T extends LogTable>(
  db: Kysely<Database>,
  table: T,
  rows: readonly Insertable<Database[T]>[],
): Promise<void> {
  await insertInChunks(db, table, rows, LOG_ROWS_PER_INSERT);
}

/**
 * Deletes all but the newest `keep` rows (by id), of those with `project_id` null or not when
 * `authenticated` is given (the API log keeps the two apart). Returns how many were deleted.
 */
export async function keepNewest(
  db: Kysely<Database>,
  table: LogTable,
  keep: number,
  authenticated?: boolean,
): Promise<number> {
  const scope = authenticated === undefined ? null : authenticated ? ('is not' as const) : ('is' as const);
  let cutoffQuery = db.selectFrom(table).select('id').orderBy('id', 'desc').offset(keep).limit(1);
  if (scope !== null) cutoffQuery = cutoffQuery.where('project_id', scope, null);
  const cutoff = await cutoffQuery.executeTakeFirst();
  if (cutoff === undefined) return 0;
  let deletion = db.deleteFrom(table).where('id', '<=', cutoff.id);
  if (scope !== null) deletion = deletion.where('project_id', scope, null);
  return Number((await deletion.executeTakeFirst()).numDeletedRows);
}
