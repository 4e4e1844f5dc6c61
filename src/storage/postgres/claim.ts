import type { Kysely } from 'kysely';
import type { Database, NotificationRow } from '../schema.js';
import type { ClaimRequest } from '../storage.js';

/**
 * Many workers claim concurrently: FOR UPDATE SKIP LOCKED lets each take a disjoint batch without
 * waiting on the rows another worker is claiming, and one statement claims a whole batch.
 *
 * The batch is picked in a MATERIALIZED CTE, not in `WHERE id IN (SELECT … LIMIT n SKIP LOCKED)`:
 * PostgreSQL may run such a sub-select more than once (as the inner side of a join that it
 * rescans), and with SKIP LOCKED each run can return other rows, so a claim could take more than
 * `limit` rows. A materialized CTE is evaluated exactly once. Under READ COMMITTED a row another
 * worker claimed and committed meanwhile is re-checked against `state = 'queued'` when locked, so
 * it is skipped, never claimed twice.
 */
export async function claimDuePostgres(
  db: Kysely<Database>,
  claim: ClaimRequest,
): Promise<NotificationRow[]> {
  const rows = await db
    .with(
      (cte) => cte('due').materialized(),
      (qb) =>
        qb
          .selectFrom('notifications')
          .select('id')
          .where('state', '=', 'queued')
          .where('run_at', '<=', claim.now)
          .$if((claim.excludeProjects?.length ?? 0) > 0, (qb) =>
            qb.where('project_id', 'not in', claim.excludeProjects!),
          )
          .orderBy('run_at')
          .limit(claim.limit)
          .forUpdate()
          .skipLocked(),
    )
    .updateTable('notifications')
    .from('due')
    .set((eb) => ({
      state: 'sending',
      lease_owner: claim.owner,
      lease_until: claim.leaseUntil,
      attempts: eb('notifications.attempts', '+', 1),
      updated_at: claim.now,
    }))
    .whereRef('notifications.id', '=', 'due.id')
    .returningAll('notifications')
    .execute();
  return rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id);
}
