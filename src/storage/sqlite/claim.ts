import type { Kysely } from 'kysely';
import type { Database, NotificationRow } from '../schema.js';
import type { ClaimRequest } from '../storage.js';

/**
 * SQLite has one writer at a time, so the UPDATE … WHERE id IN (SELECT … LIMIT n) is atomic on its
 * own: no two workers can claim the same row.
 */
export async function claimDueSqlite(db: Kysely<Database>, claim: ClaimRequest): Promise<NotificationRow[]> {
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
        .$if((claim.excludeProjects?.length ?? 0) > 0, (qb) =>
          qb.where('project_id', 'not in', claim.excludeProjects!),
        )
        .orderBy('run_at')
        .limit(claim.limit),
    )
    .returningAll()
    .execute();
  return rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id);
}
