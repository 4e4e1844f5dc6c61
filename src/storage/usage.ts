import { sql, type Kysely } from 'kysely';
import type { UsageMove } from '../domain/lifecycle.js';
import type { Database, UsageState } from './schema.js';

/** Usage counters are kept per UTC hour of acceptance; days are sums of hours. */
export const USAGE_HOUR_MS = 3_600_000;

/** A row of `usage_deltas`: the sum of a transaction's changes for one project, hour and state. */
export interface UsageDeltaRow {
  readonly project_id: number;
  readonly hour_start: number;
  readonly state: UsageState;
  readonly delta: number;
}

/** Sums changes per project, hour and state; sums of zero are left out. */
export function usageDeltaRows(changes: readonly UsageMove[]): UsageDeltaRow[] {
  const sums = new Map<string, { -readonly [K in keyof UsageDeltaRow]: UsageDeltaRow[K] }>();
  for (const change of changes) {
    const hour = change.createdAt - (change.createdAt % USAGE_HOUR_MS);
    const key = `${change.projectId}:${hour}:${change.state}`;
    const sum = sums.get(key);
    if (sum === undefined)
      sums.set(key, {
        project_id: change.projectId,
        hour_start: hour,
        state: change.state,
        delta: change.delta,
      });
    else sum.delta += change.delta;
  }
  return [...sums.values()].filter((row) => row.delta !== 0);
}

/**
 * Appends the usage changes of one transaction (an accept group, a group of outcomes), summed per
 * project, hour and state first. Plain inserts: concurrent transactions never wait on each other
 * for a counter row.
 */
export async function addUsage(db: Kysely<Database>, changes: readonly UsageMove[]): Promise<void> {
  const rows = usageDeltaRows(changes);
  if (rows.length > 0) await db.insertInto('usage_deltas').values(rows).execute();
}

/**
 * Folds the appended changes into the counters. The DELETE … RETURNING takes exactly the rows it
 * removes, so a change committed meanwhile is neither lost nor counted twice, and the counters are
 * updated in key order, so two processes folding at once cannot deadlock. Returns the number of
 * changes folded.
 */
export async function foldUsage(db: Kysely<Database>, limit = 50_000): Promise<number> {
  return db.transaction().execute(async (tx) => {
    const taken = await tx
      .deleteFrom('usage_deltas')
      .where('id', 'in', (qb) => qb.selectFrom('usage_deltas').select('id').orderBy('id').limit(limit))
      .returning(['project_id', 'hour_start', 'state', 'delta'])
      .execute();
    const sums = new Map<
      string,
      { project_id: number; hour_start: number; state: UsageState; count: number }
    >();
    for (const row of taken) {
      const key = `${row.project_id}:${row.hour_start}:${row.state}`;
      const sum = sums.get(key);
      if (sum === undefined)
        sums.set(key, {
          project_id: Number(row.project_id),
          hour_start: Number(row.hour_start),
          state: row.state,
          count: Number(row.delta),
        });
      else sum.count += Number(row.delta);
    }
    const ordered = [...sums.values()].sort(
      (a, b) => a.project_id - b.project_id || a.hour_start - b.hour_start || a.state.localeCompare(b.state),
    );
    for (const row of ordered) {
      await tx
        .insertInto('usage_counters')
        .values(row)
        .onConflict((oc) =>
          oc
            .columns(['project_id', 'hour_start', 'state'])
            .doUpdateSet((eb) => ({ count: eb('usage_counters.count', '+', eb.ref('excluded.count')) })),
        )
        .execute();
    }
    return taken.length;
  });
}

export interface UsageBucketRow {
  readonly bucket: number;
  readonly state: UsageState;
  readonly count: number;
}

/**
 * A project's messages accepted in [from, to), per public state and per bucket of `bucketMs`
 * (a whole number of hours, aligned on the Unix epoch: UTC hours and days), from the counters and
 * the changes not folded yet. Reads at most one row per hour and state, however many messages.
 */
export async function usageBuckets(
  db: Kysely<Database>,
  projectId: number,
  from: number,
  to: number,
  bucketMs: number,
): Promise<UsageBucketRow[]> {
  const counted = db
    .selectFrom('usage_counters')
    .select(['hour_start', 'state', 'count as n'])
    .where('project_id', '=', projectId)
    .where('hour_start', '>=', from)
    .where('hour_start', '<', to)
    .unionAll(
      db
        .selectFrom('usage_deltas')
        .select(['hour_start', 'state', 'delta as n'])
        .where('project_id', '=', projectId)
        .where('hour_start', '>=', from)
        .where('hour_start', '<', to),
    );
  const bucket = sql<number>`hour_start - (hour_start % ${sql.lit(bucketMs)})`;
  const rows = await db
    .selectFrom(counted.as('usage'))
    .select([bucket.as('bucket'), 'state', (eb) => eb.fn.sum<number>('n').as('count')])
    .groupBy([bucket, 'state'])
    .execute();
  return rows.map((row) => ({ bucket: Number(row.bucket), state: row.state, count: Number(row.count) }));
}

/** A project's messages by public state over all time, from the counters and pending changes. */
export async function usageTotals(
  db: Kysely<Database>,
  projectId: number,
): Promise<Record<UsageState, number>> {
  const counted = db
    .selectFrom('usage_counters')
    .select(['state', 'count as n'])
    .where('project_id', '=', projectId)
    .unionAll(
      db.selectFrom('usage_deltas').select(['state', 'delta as n']).where('project_id', '=', projectId),
    );
  const rows = await db
    .selectFrom(counted.as('usage'))
    .select(['state', (eb) => eb.fn.sum<number>('n').as('count')])
    .groupBy('state')
    .execute();
  const totals: Record<UsageState, number> = { queued: 0, sent: 0, failed: 0 };
  for (const row of rows) totals[row.state] = Number(row.count);
  return totals;
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
