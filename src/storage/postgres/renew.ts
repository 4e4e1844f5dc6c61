import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { RenewRequest } from '../storage.js';

/**
 * Extends the lease of messages this worker is still sending. The same worker may at this moment
 * be recording outcomes for some of these rows in another transaction, locking them in another
 * order; taking the rows with SKIP LOCKED means renewal never waits on, or deadlocks with, that
 * transaction. A skipped row is either being finished right now or is renewed on the next tick,
 * long before its lease runs out.
 */
export async function renewLeasesPostgres(db: Kysely<Database>, renew: RenewRequest): Promise<void> {
  if (renew.ids.length === 0) return;
  await db
    .updateTable('notifications')
    .set({ lease_until: renew.leaseUntil })
    .where('id', 'in', (qb) =>
      qb
        .selectFrom('notifications')
        .select('id')
        .where('id', 'in', renew.ids)
        .where('state', '=', 'sending')
        .where('lease_owner', '=', renew.owner)
        .forUpdate()
        .skipLocked(),
    )
    .execute();
}
