import type { ClaimStatement, IdQuery } from '../queue.js';

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
export const claimPostgres: ClaimStatement = ({ leases, table, due, values }) =>
  leases
    .with(
      (cte) => cte('due').materialized(),
      () => due.forUpdate().skipLocked(),
    )
    .updateTable(table)
    .from('due')
    .set(values)
    .whereRef(`${table}.id`, '=', 'due.id')
    .returningAll(table);

/**
 * Extends the leases this worker holds. The same worker may at this moment be recording outcomes
 * for some of these rows in another transaction, locking them in another order; taking the rows
 * with SKIP LOCKED means renewal never waits on, or deadlocks with, that transaction. A skipped row
 * is either being finished right now or is renewed on the next tick, long before its lease runs out.
 */
export const lockForRenewal = (held: IdQuery): IdQuery => held.forUpdate().skipLocked();
