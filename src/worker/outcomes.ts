import type { Kysely } from 'kysely';
import type { AttemptTransition } from '../domain/lifecycle.js';
import type { RecordOutcomes } from '../queue/lease-queue.js';
import { insertAttempt } from '../storage/delivery-attempts.js';
import { FinishStatement, NOTIFICATION_QUEUE } from '../storage/queue.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import { recordEffects, type Applied } from '../storage/transitions.js';

/** An attempt as it ended: what the lifecycle made of it, and when it ran. */
export interface Attempted {
  readonly transition: AttemptTransition;
  readonly startedAt: number;
  readonly finishedAt: number;
}

/** Every column an attempt's outcome writes, so the statement has one shape (precompiled.ts). */
const COLUMNS = [
  'state',
  'run_at',
  'sent_at',
  'error_message',
  'transport',
  'message_id',
  'subject',
  'text_body',
  'html_body',
  'updated_at',
  'bounce_type',
  'bounce_category',
  'bounce_status',
  'bounce_diagnostic',
  'template_locale',
  'template_version',
  'relay',
  'waits_for_relay',
] as const;
const FINISH = new FinishStatement(NOTIFICATION_QUEUE, COLUMNS);

/**
 * Stores a group of attempts' outcomes in one transaction, each only while `owner` still holds its
 * lease: the row's new state, the attempt with the relay's reply, and what the transition brings
 * about (usage, event, suppression). `webhooksQueued` is called once a group that queued webhook
 * deliveries has committed.
 */
export function recordAttempts(
  owner: string,
  webhooksQueued: () => void,
): RecordOutcomes<NotificationRow, Attempted> {
  return async (tx: Kysely<Database>, items, afterCommit) => {
    const applied: Applied[] = [];
    const stored = await FINISH.runEach(
      tx,
      owner,
      items,
      // attemptFinished writes every one of COLUMNS.
      ({ outcome }) => outcome.transition.changes as Record<(typeof COLUMNS)[number], unknown>,
      async ({ row, outcome }) => {
        const { transition, startedAt, finishedAt } = outcome;
        await insertAttempt(tx, {
          notification_id: row.id,
          attempt: row.attempts,
          started_at: startedAt,
          finished_at: finishedAt,
          outcome: transition.outcome,
          smtp_code: transition.attempt.smtpCode,
          response: transition.attempt.response,
          transport: transition.attempt.transport,
          relay: transition.attempt.relay,
        });
        applied.push({
          projectId: row.project_id,
          notificationId: row.id,
          row: () => ({ ...row, ...transition.changes, lease_owner: null, lease_until: null }),
          transition,
          at: finishedAt,
        });
      },
    );
    if ((await recordEffects(tx, applied)) > 0) afterCommit(webhooksQueued);
    return stored;
  };
}
