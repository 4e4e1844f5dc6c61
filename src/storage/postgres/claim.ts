import { sql } from 'kysely';
import { projectsClaimed, type ClaimBackend, type ClaimParts, type HeadRow } from '../claim.js';
import type { IdQuery } from '../queue.js';

/**
 * Many workers claim concurrently: FOR UPDATE SKIP LOCKED lets each take a disjoint batch without
 * waiting on the rows another worker is claiming, and one statement claims a whole batch.
 *
 * The batch is picked in a MATERIALIZED CTE, not in `WHERE id IN (SELECT … LIMIT n SKIP LOCKED)`:
 * PostgreSQL may run such a sub-select more than once (as the inner side of a join that it
 * rescans), and with SKIP LOCKED each run can return other rows, so a claim could take more than
 * `limit` rows. A materialized CTE is evaluated exactly once. Under READ COMMITTED a row another
 * worker claimed and committed meanwhile is re-checked against its ready state when locked, so it
 * is skipped, never claimed twice.
 */
export const claimPostgres: ClaimBackend = {
  lockDue: (due) => due.forUpdate().skipLocked(),
  heads,
  take: ({ leases, table, values }, due) =>
    leases
      .with(
        (cte) => cte('due').materialized(),
        () => due,
      )
      .updateTable(table)
      .from('due')
      .set(values)
      .whereRef(`${table}.id`, '=', 'due.id')
      .returningAll(table),
};

/**
 * Each project's oldest due rows, for a claim in turns, locked as they are read (a window
 * function cannot lock the rows it ranks): a claim may lock more rows than it takes, which other
 * workers skip until its statement ends. The project is bounded as `project_id >= p.id` and
 * `(project_id, run_at) <= (p.id, $now)`, and the rows ordered by both columns: a range and an
 * order only the projects' due index (migration 019) serves. Given `project_id = p.id` and
 * `run_at <= $now`, the planner, which cannot know a project's share of the queue, read one
 * project's rows through the queue-wide due index in `run_at` order, filtering out a large
 * backlog of another project's on the way: 2.3 s for one claim behind a backlog of 200,000
 * (6 ms so).
 */
function heads({ table, queue, claim }: ClaimParts) {
  const rows = sql.table(table);
  return sql<HeadRow>`SELECT q.id, q.project_id, q.run_at FROM queued_projects p CROSS JOIN LATERAL (
      SELECT m.id, m.project_id, m.run_at FROM ${rows} m
      WHERE m.state = ${queue.ready} AND m.project_id >= p.id AND (m.project_id, m.run_at) <= (p.id, ${claim.now})
      ORDER BY m.project_id, m.run_at LIMIT ${claim.limit} FOR UPDATE SKIP LOCKED) q
    WHERE ${projectsClaimed(claim)}`;
}

/**
 * Extends the leases this worker holds. The same worker may at this moment be recording outcomes
 * for some of these rows in another transaction, locking them in another order; taking the rows
 * with SKIP LOCKED means renewal never waits on, or deadlocks with, that transaction. A skipped row
 * is either being finished right now or is renewed on the next tick, long before its lease runs out.
 */
export const lockForRenewal = (held: IdQuery): IdQuery => held.forUpdate().skipLocked();
