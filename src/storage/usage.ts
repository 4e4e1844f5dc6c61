import { sql, type Kysely } from 'kysely';
import type { Database, NotificationState } from './schema.js';

export interface UsageBucketRow {
  readonly bucket: number;
  readonly state: NotificationState;
  readonly count: number;
}

/**
 * Notifications of one project created in [from, to), counted per state and per bucket of
 * `bucketMs` (aligned on the Unix epoch, so buckets of an hour or a day are UTC hours and days).
 * The range scan uses the (project_id, created_at) index. Integer `-` and `%` give the same
 * result on SQLite INTEGER and PostgreSQL BIGINT.
 */
export async function usageBuckets(
  db: Kysely<Database>,
  projectId: number,
  from: number,
  to: number,
  bucketMs: number,
): Promise<UsageBucketRow[]> {
  const bucket = sql<number>`created_at - (created_at % ${sql.lit(bucketMs)})`;
  const rows = await db
    .selectFrom('notifications')
    .select([bucket.as('bucket'), 'state', (eb) => eb.fn.countAll<number>().as('count')])
    .where('project_id', '=', projectId)
    .where('created_at', '>=', from)
    .where('created_at', '<', to)
    .groupBy([bucket, 'state'])
    .execute();
  return rows.map((row) => ({ bucket: Number(row.bucket), state: row.state, count: Number(row.count) }));
}

/**
 * The time of the project's newest notification (its last activity), or null. One index lookup on
 * (project_id, created_at), unlike a GROUP BY over the whole table.
 */
export async function lastActivity(db: Kysely<Database>, projectId: number): Promise<number | null> {
  const row = await db
    .selectFrom('notifications')
    .select((eb) => eb.fn.max('created_at').as('last'))
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return row?.last == null ? null : Number(row.last);
}
