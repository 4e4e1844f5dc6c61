import type { Kysely } from 'kysely';
import type { Database, WebhookDeliveryRow } from '../schema.js';
import type { WebhookClaim } from '../storage.js';

/** Claims due deliveries of one endpoint; SQLite's single writer makes the UPDATE atomic. */
export async function claimWebhooksSqlite(
  db: Kysely<Database>,
  claim: WebhookClaim,
): Promise<WebhookDeliveryRow[]> {
  return db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      state: 'sending',
      lease_owner: claim.owner,
      lease_until: claim.leaseUntil,
      attempts: eb('attempts', '+', 1),
      updated_at: claim.now,
    }))
    .where('id', 'in', (qb) =>
      qb
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', claim.endpointId)
        .where('state', '=', 'pending')
        .where('run_at', '<=', claim.now)
        .orderBy('run_at')
        .limit(claim.limit),
    )
    .returningAll()
    .execute();
}
