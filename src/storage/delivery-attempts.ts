import type { Kysely } from 'kysely';
import { Precompiled } from './precompiled.js';
import type { Database, DeliveryAttemptRow } from './schema.js';
import type { ReturnedLease } from './queue.js';
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

/**
 * The reply recorded for an attempt whose worker stopped before its outcome was stored (a crash,
 * a stop that outlived its timeout, a store that refused the outcome until the worker gave up).
 */
export const INTERRUPTED_RESPONSE =
  'Its worker stopped before the outcome of this attempt was stored: the attempt may have been under ' +
  'way and the relay may have received the message, so the next attempt may deliver it a second time';

/**
 * Records the attempts of notifications taken back from a stopped worker (queue.ts `returnLeases`),
 * each as `interrupted`, from its claim to now: without them a message sent again after a crash
 * shows a second attempt and no first.
 */
export async function insertInterruptedAttempts(
  db: Kysely<Database>,
  rows: readonly ReturnedLease[],
  now: number,
): Promise<void> {
  await db
    .insertInto('delivery_attempts')
    .values(
      rows.map((row) => ({
        notification_id: row.id,
        attempt: row.attempts,
        started_at: row.claimedAt,
        finished_at: now,
        outcome: 'interrupted' as const,
        smtp_code: null,
        response: INTERRUPTED_RESPONSE,
        transport: null,
        relay: null,
      })),
    )
    .execute();
}
