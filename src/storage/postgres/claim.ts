import type { Kysely } from 'kysely';
import type { Database, NotificationRow } from '../schema.js';
import type { ClaimRequest } from '../storage.js';

/**
 * Many workers claim concurrently: FOR UPDATE SKIP LOCKED lets each take a disjoint batch without
 * waiting on the rows another worker is claiming, and one query claims a whole batch.
 */
export async function claimDuePostgres(
  db: Kysely<Database>,
  claim: ClaimRequest,
): Promise<NotificationRow[]> {
  const rows = await db
    .updateTable('notifications')
    .set((eb) => ({
      state: 'sending',
      lease_owner: claim.owner,
      lease_until: claim.leaseUntil,
      attempts: eb('attempts', '+', 1),
      updated_at: claim.now,
    }))
    .where('id', 'in', (qb) =>
      qb
        .selectFrom('notifications')
        .select('id')
        .where('state', '=', 'queued')
        .where('run_at', '<=', claim.now)
        .orderBy('run_at')
        .limit(claim.limit)
        .forUpdate()
        .skipLocked(),
    )
    .returningAll()
    .execute();
  return rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id);
}
