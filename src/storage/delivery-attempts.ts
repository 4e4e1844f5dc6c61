import type { Insertable, Kysely } from 'kysely';
import type { Database, DeliveryAttemptRow, DeliveryAttemptsTable } from './schema.js';

export async function insertAttempt(
  db: Kysely<Database>,
  row: Insertable<DeliveryAttemptsTable>,
): Promise<void> {
  await db.insertInto('delivery_attempts').values(row).execute();
}

export async function listAttempts(
  db: Kysely<Database>,
  notificationId: number,
): Promise<DeliveryAttemptRow[]> {
  return db
    .selectFrom('delivery_attempts')
    .selectAll()
    .where('notification_id', '=', notificationId)
    .orderBy('attempt')
    .orderBy('id')
    .execute();
}
