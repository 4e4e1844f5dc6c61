import type { Kysely } from 'kysely';
import { Precompiled } from './precompiled.js';
import type { Database, DeliveryAttemptRow } from './schema.js';
import { listRows } from './rows.js';

/** One attempt as recorded: every column, so the statement has one shape. */
export type NewAttempt = Omit<DeliveryAttemptRow, 'id'>;

const INSERT_ATTEMPT = new Precompiled(
  [
    'notification_id',
    'attempt',
    'started_at',
    'finished_at',
    'outcome',
    'smtp_code',
    'response',
    'transport',
    'relay',
  ] as const,
  (db, slot) =>
    db.insertInto('delivery_attempts').values({
      notification_id: slot('notification_id'),
      attempt: slot('attempt'),
      started_at: slot('started_at'),
      finished_at: slot('finished_at'),
      outcome: slot('outcome'),
      smtp_code: slot('smtp_code'),
      response: slot('response'),
      transport: slot('transport'),
      relay: slot('relay'),
    }),
);

/** Runs once per delivery attempt, so its SQL is built once (see precompiled.ts). */
export async function insertAttempt(db: Kysely<Database>, row: NewAttempt): Promise<void> {
  await INSERT_ATTEMPT.run(db, row);
}

export async function listAttempts(
  db: Kysely<Database>,
  notificationId: number,
): Promise<DeliveryAttemptRow[]> {
  return listRows(db, 'delivery_attempts', { notification_id: notificationId }, 'attempt', 'id');
}
