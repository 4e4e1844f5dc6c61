import type { Kysely } from 'kysely';
import { MAX_DIAGNOSTIC } from '../domain/bounce/classify.js';
// From the domain, not from ./report.js, which loads the MIME parser that only its thread needs.
import {
  bounceSeverity,
  type BounceRecipient,
  type FeedbackReport,
} from '../domain/bounce/feedback-report.js';
import { bounced, complained, type Transition } from '../domain/lifecycle.js';
import { suppressionKey } from '../domain/suppression.js';
import { finishReport } from '../storage/inbound-reports.js';
import { findNotification, findNotificationById } from '../storage/notifications.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import { applyTransition } from '../storage/transitions.js';
import type { Signal } from '../services/signal.js';

/** Which notification a report is for, as its envelope recipient says. */
export type ReportTarget = { readonly kind: 'token'; readonly id: number } | { readonly kind: 'plain' };

/**
 * The read report this change comes from (storage/inbound-reports.ts): it is recorded as done in
 * the transaction of the change, and a report another reader took over is not applied.
 */
export interface ReportReceipt {
  readonly fingerprint: string;
  readonly owner: string;
  /** Until when, once applied, the reader holds the report to move it (receive.ts). */
  readonly until: number;
}

/** What a report came to, for the reader's log. */
export interface IntakeResult {
  /** `duplicate`: another reader applied this very report (the same bytes) first. */
  readonly outcome: 'bounced' | 'soft_bounce' | 'complained' | 'ignored' | 'duplicate';
  readonly requestId?: string;
  /** Why nothing changed, when ignored. */
  readonly why?: string;
}

/** Thrown inside a transaction to roll it back: the report's receipt belongs to another reader. */
class TakenOver extends Error {}

/**
 * Applies bounce reports and complaints to notifications (product.md §5): the report is matched to
 * its notification, the lifecycle (domain/lifecycle.ts) decides what it changes, and the change,
 * with its usage, event and suppression, is committed in one transaction.
 */
export class BounceIntake {
  constructor(
    private readonly db: Kysely<Database>,
    /** Fired once a report's event queued webhook deliveries (services/signal.ts). */
    private readonly webhooksQueued: Signal,
    private readonly now: () => number = Date.now,
  ) {}

  async apply(target: ReportTarget, report: FeedbackReport, receipt?: ReportReceipt): Promise<IntakeResult> {
    try {
      return await this.applyOnce(target, report, receipt);
    } catch (error) {
      if (error instanceof TakenOver) return { outcome: 'duplicate' };
      throw error;
    }
  }

  private async applyOnce(
    target: ReportTarget,
    report: FeedbackReport,
    receipt: ReportReceipt | undefined,
  ): Promise<IntakeResult> {
    if (report.kind === 'unknown') return { outcome: 'ignored', why: 'not a bounce report or complaint' };
    const row = await this.notificationFor(target, report);
    if (row === undefined) return { outcome: 'ignored', why: 'no notification matches the report' };
    if (report.kind === 'complaint') {
      const applied = await this.applyLatest(
        row,
        (current, now) => complained(current, report.feedbackType, now),
        receipt && { ...receipt, outcome: 'complained' },
      );
      return applied
        ? { outcome: 'complained', requestId: row.request_id }
        : { outcome: 'ignored', requestId: row.request_id, why: 'already complained' };
    }
    const line = lineFor(row, report.recipients);
    const severity = line === undefined ? null : bounceSeverity(line);
    if (line === undefined || severity === null)
      return {
        outcome: 'ignored',
        requestId: row.request_id,
        why: 'the report shows no failure for the recipient',
      };
    const facts = {
      final: severity === 'hard',
      verdict: {
        type: line.type,
        category: line.category,
        status: line.status,
        diagnostic: (line.diagnostic ?? line.status ?? 'no diagnostic given').slice(0, MAX_DIAGNOSTIC),
      },
    };
    const applied = await this.applyLatest(
      row,
      (current, now) => bounced(current, facts, now),
      receipt && { ...receipt, outcome: facts.final ? 'bounced' : 'soft_bounce' },
    );
    if (!applied)
      return {
        outcome: 'ignored',
        requestId: row.request_id,
        why: row.sent_at === null ? 'the message was never sent' : 'already bounced',
      };
    return { outcome: facts.final ? 'bounced' : 'soft_bounce', requestId: row.request_id };
  }

  /**
   * Applies what the lifecycle decides for the row as it is now; when another change got there
   * first (a second copy of the same report, applied at once), decides again on the row as it
   * became. False when the lifecycle says there is nothing left to do. With a receipt, the report
   * is recorded as done in the same transaction; TakenOver when another reader holds it now.
   */
  private async applyLatest(
    row: NotificationRow,
    decide: (row: NotificationRow, now: number) => Transition | null,
    receipt?: ReportReceipt & { readonly outcome: string },
  ): Promise<boolean> {
    for (let current: NotificationRow | undefined = row; current !== undefined;) {
      const now = this.now();
      const transition = decide(current, now);
      if (transition === null) return false;
      const decidedOn: NotificationRow = current;
      const written = await this.db.transaction().execute(async (tx) => {
        const applied = await applyTransition(tx, decidedOn, transition, now);
        if (applied === undefined || receipt === undefined) return applied;
        if (!(await finishReport(tx, receipt.fingerprint, receipt.owner, receipt.outcome, receipt.until)))
          throw new TakenOver();
        return applied;
      });
      if (written !== undefined) {
        if (written.webhookDeliveries > 0) this.webhooksQueued.fire();
        return true;
      }
      current = await findNotificationById(this.db, row.id);
    }
    return false;
  }

  /**
   * The token names the notification. Without one (a report sent to plain `bounces@`), the returned
   * Message-ID must name it, and the original recipient, where the report gives one, must match:
   * both are known only to someone who received the message.
   */
  private async notificationFor(
    target: ReportTarget,
    report: Exclude<FeedbackReport, { kind: 'unknown' }>,
  ): Promise<NotificationRow | undefined> {
    if (target.kind === 'token') return findNotificationById(this.db, target.id);
    const messageId = report.originalMessageId?.trim().toLowerCase();
    if (!messageId || messageId.length > 400) return undefined;
    const requestId = messageId.slice(0, messageId.lastIndexOf('@'));
    if (requestId === '') return undefined;
    const row = await findNotification(this.db, requestId);
    if (row === undefined || row.message_id?.toLowerCase() !== messageId) return undefined;
    const recipients =
      report.kind === 'complaint' ? [report.recipient] : report.recipients.map((r) => r.recipient);
    const named = recipients.flatMap((r) => (r === null ? [] : [suppressionKey(r)]));
    if (named.length > 0 && !named.includes(suppressionKey(row.recipient))) return undefined;
    return row;
  }
}

/** The report's line for this message's recipient; a report naming only others is not about it. */
function lineFor(row: NotificationRow, recipients: readonly BounceRecipient[]): BounceRecipient | undefined {
  const address = suppressionKey(row.recipient);
  return (
    recipients.find((r) => r.recipient !== null && suppressionKey(r.recipient) === address) ??
    (recipients.length === 1 && recipients[0]!.recipient === null ? recipients[0] : undefined) ??
    recipients.find((r) => r.recipient === null)
  );
}
