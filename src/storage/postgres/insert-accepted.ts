import { sql, type Kysely } from 'kysely';
import type { Database, NewNotificationRow } from '../schema.js';
import type { AcceptedMetadata } from '../storage.js';
import type { UsageDeltaRow } from '../usage.js';

/** Rows one statement may carry: well under PostgreSQL's 65,535 parameters. */
const MAX_ROWS = 500;

/**
 * Inserts accepted rows, their usage deltas and their metadata index rows with one statement, a
 * data-modifying WITH: one round trip instead of a transaction's five (BEGIN, three inserts,
 * COMMIT), and atomic on its own. The metadata joins the inserted rows by request id, as three
 * arrays (three parameters however many keys). Undefined when the rows do not fit in one statement.
 */
export async function insertAcceptedPostgres(
  db: Kysely<Database>,
  rows: readonly NewNotificationRow[],
  usage: readonly UsageDeltaRow[],
  metadata: readonly AcceptedMetadata[],
): Promise<Map<string, number> | undefined> {
  if (rows.length === 0 || rows.length > MAX_ROWS || usage.length === 0) return undefined;
  const inserted = db
    .with('counted', (qb) => qb.insertInto('usage_deltas').values(usage))
    .with('inserted', (qb) =>
      qb.insertInto('notifications').values(rows).returning(['id', 'request_id', 'project_id']),
    );
  const query =
    metadata.length === 0
      ? inserted
      : inserted.with('tagged', (qb) =>
          qb
            .insertInto('notification_metadata')
            .columns(['notification_id', 'project_id', 'key', 'value'])
            .expression((eb) =>
              eb
                .selectFrom('inserted')
                .innerJoin(
                  sql<{ request_id: string; key: string; value: string }>`(select
                    unnest(${metadata.map((m) => m.request_id)}::text[]) as request_id,
                    unnest(${metadata.map((m) => m.key)}::text[]) as key,
                    unnest(${metadata.map((m) => m.value)}::text[]) as value)`.as('m'),
                  'm.request_id',
                  'inserted.request_id',
                )
                .select(['inserted.id', 'inserted.project_id', 'm.key', 'm.value']),
            ),
        );
  const ids = await query.selectFrom('inserted').select(['id', 'request_id']).execute();
  return new Map(ids.map((row) => [row.request_id, row.id]));
}
