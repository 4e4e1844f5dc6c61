import type { Kysely } from 'kysely';
import type { Database, NewNotificationRow } from '../schema.js';
import type { UsageDeltaRow } from '../usage.js';

/** Rows one statement may carry: well under PostgreSQL's 65,535 parameters. */
const MAX_ROWS = 500;

/**
 * Inserts accepted rows and their usage deltas with one statement, a data-modifying WITH: one
 * round trip instead of a transaction's four (BEGIN, two inserts, COMMIT), and atomic on its own.
 * Undefined when the rows do not fit in one statement.
 */
export async function insertAcceptedPostgres(
  db: Kysely<Database>,
  rows: readonly NewNotificationRow[],
  usage: readonly UsageDeltaRow[],
): Promise<Map<string, number> | undefined> {
  if (rows.length === 0 || rows.length > MAX_ROWS || usage.length === 0) return undefined;
  const inserted = await db
    .with('counted', (qb) => qb.insertInto('usage_deltas').values(usage))
    .with('inserted', (qb) => qb.insertInto('notifications').values(rows).returning(['id', 'request_id']))
    .selectFrom('inserted')
    .select(['id', 'request_id'])
    .execute();
  return new Map(inserted.map((row) => [row.request_id, row.id]));
}
