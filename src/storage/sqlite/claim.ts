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
 * SQLite has one writer at a time, so `UPDATE … WHERE id IN (SELECT … LIMIT n)` is atomic on its
 * own: no two workers can claim the same row.
 */
export async function claimSqlite<Table extends QueueTable>(
  db: Kysely<Database>,
  queue: Queue<Table>,
  claim: ClaimRequest,
): Promise<QueueRows[Table][]> {
  // One query for every queue: the table is taken as any of them (they share these columns).
  const table: QueueTable = queue.table;
  const leases = leaseDb(db);
  const rows = await leases
    .updateTable(table)
    .set(claimedValues(table, claim))
    .where('id', 'in', dueIds(leases, queue, claim))
    .returningAll()
    .execute();
  return byDueTime(rows as unknown as QueueRows[Table][]);
}

/** Extends the leases this worker holds (the single writer needs no row locks). */
export async function renewSqlite(db: Kysely<Database>, queue: Queue, renew: RenewRequest): Promise<void> {
  if (renew.ids.length === 0) return;
  await leaseDb(db)
    .updateTable(queue.table)
    .set({ lease_until: renew.leaseUntil })
    .where('id', 'in', renew.ids)
    .where('state', '=', LEASED)
    .where('lease_owner', '=', renew.owner)
    .execute();
}
