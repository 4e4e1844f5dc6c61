import type { Kysely } from 'kysely';
import {
  byDueTime,
  claimedValues,
  dueIds,
  leaseDb,
  LEASED,
  type ClaimRequest,
  type Queue,
  type QueueRows,
  type QueueTable,
  type RenewRequest,
} from '../queue.js';
import type { Database } from '../schema.js';

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
export async function claimPostgres<Table extends QueueTable>(
  db: Kysely<Database>,
  queue: Queue<Table>,
  claim: ClaimRequest,
): Promise<QueueRows[Table][]> {
  // One query for every queue: the table is taken as any of them (they share these columns).
  const table: QueueTable = queue.table;
  const leases = leaseDb(db);
  const rows = await leases
    .with(
      (cte) => cte('due').materialized(),
      () => dueIds(leases, queue, claim).forUpdate().skipLocked(),
    )
    .updateTable(table)
    .from('due')
    .set(claimedValues(table, claim))
    .whereRef(`${table}.id`, '=', 'due.id')
    .returningAll(table)
    .execute();
  return byDueTime(rows as unknown as QueueRows[Table][]);
}

/**
 * Extends the leases this worker holds. The same worker may at this moment be recording outcomes
 * for some of these rows in another transaction, locking them in another order; taking the rows
 * with SKIP LOCKED means renewal never waits on, or deadlocks with, that transaction. A skipped row
 * is either being finished right now or is renewed on the next tick, long before its lease runs out.
 */
export async function renewPostgres(db: Kysely<Database>, queue: Queue, renew: RenewRequest): Promise<void> {
  if (renew.ids.length === 0) return;
  const leases = leaseDb(db);
  await leases
    .updateTable(queue.table)
    .set({ lease_until: renew.leaseUntil })
    .where('id', 'in', (qb) =>
      qb
        .selectFrom(queue.table)
        .select('id')
        .where('id', 'in', renew.ids)
        .where('state', '=', LEASED)
        .where('lease_owner', '=', renew.owner)
        .forUpdate()
        .skipLocked(),
    )
    .execute();
}
