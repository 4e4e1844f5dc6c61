import type { Kysely } from 'kysely';
import { retryDelay } from '../domain/retry.js';
import { insertAttempt } from '../storage/delivery-attempts.js';
import { GroupCommit } from '../services/group-commit.js';
import { finishDelivery, type FinishedColumns } from '../storage/notifications.js';
import { addUsage } from '../storage/usage.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import { addSuppressions, type NewSuppression } from '../storage/suppressions.js';
import { recordEvents, type OutboxEvent } from '../storage/webhook-events.js';
import { enhancedStatusIn, provesBadMailbox, suppressionKey } from '../domain/suppression.js';
import { statusBody } from '../services/notifications.js';
import type { AttemptResult } from './deliver.js';

/** One finished attempt, waiting for its outcome to be stored. */
export interface Finished {
  readonly row: NotificationRow;
  readonly startedAt: number;
  readonly result: AttemptResult;
}

/** What an attempt came to, for the worker's logs and metrics. */
export interface DeliveryOutcome {
  readonly projectId: number;
  readonly outcome: 'sent' | 'retry' | 'failed';
  readonly transport: 'smtp' | 'capture' | null;
  readonly durationMs: number;
}

/** An outcome that is durable now. */
export interface StoredOutcome {
  readonly row: NotificationRow;
  readonly result: AttemptResult;
  readonly outcome: DeliveryOutcome['outcome'];
  readonly durationMs: number;
}

export interface OutcomeOptions {
  readonly owner: string;
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly now: () => number;
  /** Told when an outcome could not be stored because the lease was lost meanwhile. */
  readonly onLeaseLost: (row: NotificationRow) => void;
  /** Told about each outcome once its transaction has committed; must not throw. */
  readonly onStored?: (stored: StoredOutcome) => void;
}

/**
 * Stores what attempts came to: `sent`, back to `queued` for a retry (transient failure with
 * attempts left), or `failed`; and the attempt itself, with the relay's reply. Outcomes are
 * committed in groups: with a durable commit per message the store, not the relay, would bound
 * delivery throughput. An outcome is stored only while this worker still holds the row's lease.
 */
export class OutcomeRecorder {
  private readonly group: GroupCommit<Finished, void>;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly options: OutcomeOptions,
  ) {
    // Outcomes trickle in as relays answer, one lane at a time; waiting a few milliseconds lets a
    // commit carry dozens of them instead of one or two. Only the bookkeeping waits, not the mail.
    this.group = new GroupCommit((items) => this.commit(items), { maxDelayMs: 10, maxBatch: 500 });
  }

  /** Resolves once the outcome is durable (or was dropped because the lease was lost). */
  record(finished: Finished): Promise<void> {
    return this.group.submit(finished);
  }

  flush(): Promise<void> {
    return this.group.flush();
  }

  private async commit(items: readonly Finished[]): Promise<void[]> {
    const now = this.options.now();
    const stored = await this.db.transaction().execute(async (tx) => {
      const done: StoredOutcome[] = [];
      const events: OutboxEvent[] = [];
      const suppressions: NewSuppression[] = [];
      for (const item of items) {
        const outcome = await this.store(tx, item, now);
        if (outcome === null) continue;
        done.push({
          row: item.row,
          result: item.result,
          outcome: outcome.outcome,
          durationMs: now - item.startedAt,
        });
        events.push(outcome.event);
        if (outcome.suppression !== null) suppressions.push(outcome.suppression);
      }
      // The events and suppressions commit with the state changes they follow from (an outbox):
      // a crash loses all of them or none.
      await recordEvents(tx, events);
      await addSuppressions(tx, suppressions);
      // A finished message moves from queued to its final state in the usage counters, in the
      // transaction that records it.
      await addUsage(
        tx,
        done.flatMap(({ row, outcome }) =>
          outcome === 'retry'
            ? []
            : [
                { projectId: row.project_id, createdAt: row.created_at, state: 'queued' as const, delta: -1 },
                { projectId: row.project_id, createdAt: row.created_at, state: outcome, delta: 1 },
              ],
        ),
      );
      return done;
    });
    // After the commit: a listener that throws must not make the committed batch look failed.
    for (const outcome of stored) {
      try {
        this.options.onStored?.(outcome);
      } catch {
        // Logging and metrics only; the outcome is stored.
      }
    }
    return items.map(() => undefined);
  }

  /** Stores one outcome; null when the lease was lost meanwhile and nothing was stored. */
  private async store(
    tx: Kysely<Database>,
    { row, startedAt, result }: Finished,
    now: number,
  ): Promise<{
    outcome: DeliveryOutcome['outcome'];
    event: OutboxEvent;
    suppression: NewSuppression | null;
  } | null> {
    const { owner, maxAttempts, retryBaseMs } = this.options;
    // What the outcome leaves alone keeps the row's values (content not rendered this time, the
    // time it was due, no sent time yet).
    const common = {
      subject: result.rendered ? result.rendered.subject : row.subject,
      text_body: result.rendered ? result.rendered.text : row.text_body,
      html_body: result.rendered ? result.rendered.html : row.html_body,
      updated_at: now,
      transport: result.transport,
      message_id: result.messageId,
    };
    let outcome: 'sent' | 'retry' | 'failed';
    let changes: FinishedColumns;
    if (result.ok) {
      outcome = 'sent';
      changes = { ...common, state: 'sent', run_at: row.run_at, sent_at: now, error_message: null };
    } else {
      const retry = result.failure.kind === 'transient' && row.attempts < maxAttempts;
      outcome = retry ? 'retry' : 'failed';
      changes = {
        ...common,
        state: retry ? 'queued' : 'failed',
        run_at: retry ? now + retryDelay(row.attempts, retryBaseMs) : row.run_at,
        sent_at: row.sent_at,
        error_message: result.failure.message,
      };
    }
    const stored = await finishDelivery(tx, row.id, owner, changes);
    if (!stored) {
      this.options.onLeaseLost(row);
      return null;
    }
    await insertAttempt(tx, {
      notification_id: row.id,
      attempt: row.attempts,
      started_at: startedAt,
      finished_at: now,
      outcome,
      smtp_code: result.ok ? result.smtpCode : result.failure.smtpCode,
      response: result.ok ? result.response : result.failure.message,
      transport: result.transport,
    });
    const after: NotificationRow = { ...row, ...changes, lease_owner: null, lease_until: null };
    const event: OutboxEvent = {
      projectId: row.project_id,
      notificationId: row.id,
      type: EVENT_OF[outcome],
      data: { ...statusBody(after) },
      at: now,
    };
    return { outcome, event, suppression: suppressionFor(row, result, now) };
  }
}

const EVENT_OF = {
  sent: 'notification.sent',
  retry: 'notification.deferred',
  failed: 'notification.failed',
} as const;

/**
 * A relay's permanent refusal of the recipient that proves the mailbox is bad (5.1.1, 5.1.10,
 * 5.2.1) puts the address on the project's suppression list; a policy refusal (5.7.x) or any other
 * failure does not. Only a reply to RCPT TO (or DATA) is about the recipient: a relay that checks
 * the sender answers MAIL FROM with 5.1.1 when the Return-Path is in trouble, which says nothing
 * about the mailbox being mailed.
 */
function suppressionFor(row: NotificationRow, result: AttemptResult, now: number): NewSuppression | null {
  if (result.ok || result.failure.kind !== 'permanent' || (result.failure.smtpCode ?? 0) < 500) return null;
  if (result.failure.command !== 'RCPT TO' && result.failure.command !== 'DATA') return null;
  if (!provesBadMailbox(enhancedStatusIn(result.failure.message))) return null;
  const email = suppressionKey(row.recipient);
  if (email === null) return null;
  return {
    projectId: row.project_id,
    email,
    reason: 'hard_bounce',
    requestId: row.request_id,
    detail: result.failure.message.slice(0, 500),
    now,
  };
}
