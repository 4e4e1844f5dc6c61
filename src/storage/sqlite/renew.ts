import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { RenewRequest } from '../storage.js';

/** Extends the lease of messages this worker is still sending (SQLite has a single writer). */
export async function renewLeasesSqlite(db: Kysely<Database>, renew: RenewRequest): Promise<void> {
  if (renew.ids.length === 0) return;
  await db
    .updateTable('notifications')
    .set({ lease_until: renew.leaseUntil })
    .where('id', 'in', renew.ids)
    .where('state', '=', 'sending')
    .where('lease_owner', '=', renew.owner)
    .execute();
}
