import type { Kysely } from 'kysely';
import type { Database, WebhookDeliveryRow } from '../schema.js';
import type { WebhookClaim } from '../storage.js';

/**
 * Claims due deliveries of one endpoint. As with notifications (claim.ts), the rows are picked once
 * in a MATERIALIZED CTE with SKIP LOCKED, so concurrent workers take disjoint rows and none twice.
 */
export async function claimWebhooksPostgres(
  db: Kysely<Database>,
  claim: WebhookClaim,
): Promise<WebhookDeliveryRow[]> {
  return db
    .with(
      (cte) => cte('due').materialized(),
      (qb) =>
        qb
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('endpoint_id', '=', claim.endpointId)
          .where('state', '=', 'pending')
          .where('run_at', '<=', claim.now)
          .orderBy('run_at')
          .limit(claim.limit)
          .forUpdate()
          .skipLocked(),
    )
    .updateTable('webhook_deliveries')
    .from('due')
    .set((eb) => ({
      state: 'sending',
      lease_owner: claim.owner,
      lease_until: claim.leaseUntil,
      attempts: eb('webhook_deliveries.attempts', '+', 1),
      updated_at: claim.now,
    }))
    .whereRef('webhook_deliveries.id', '=', 'due.id')
    .returningAll('webhook_deliveries')
    .execute();
}
