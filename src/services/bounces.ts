import type { Kysely } from 'kysely';
import { bounceSeverity, type BounceRecipient, type FeedbackReport } from '../bounces/report.js';
import { provesBadMailbox, suppressionKey } from '../domain/suppression.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import {
  findNotification,
  findNotificationById,
  markBounced,
  markComplained,
} from '../storage/notifications.js';
import { addSuppressions } from '../storage/suppressions.js';
import { addUsage } from '../storage/usage.js';
import { recordEvents } from '../storage/webhook-events.js';
import { statusBody } from './notifications.js';

/** Which notification a report is for, as its envelope recipient says. */
export type ReportTarget = { readonly kind: 'token'; readonly id: number } | { readonly kind: 'plain' };

/** What a report came to, for the listener's log. */
export interface IntakeResult {
  readonly outcome: 'bounced' | 'soft_bounce' | 'complained' | 'ignored';
  readonly requestId?: string;
  /** Why nothing changed, when ignored. */
  readonly why?: string;
}

const MAX_DIAGNOSTIC = 500;

/**
 * Applies bounce reports and complaints to notifications (product.md §5): a hard bounce of a sent
 * message turns it `failed` with `Bounced: <diagnostic>`, a bounce that proves the mailbox bad and
 * any complaint suppress the address, and every report of a known message becomes an event. All of
 * it in one transaction, with the events (the outbox).
 */
export class BounceIntake {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  async apply(target: ReportTarget, report: FeedbackReport): Promise<IntakeResult> {
    if (report.kind === 'unknown') return { outcome: 'ignored', why: 'not a bounce report or complaint' };
    const row = await this.notificationFor(target, report);
    if (row === undefined) return { outcome: 'ignored', why: 'no notification matches the report' };
    return report.kind === 'complaint'
      ? this.complaint(row, report.feedbackType)
      : this.bounce(row, report.recipients);
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

  private async bounce(row: NotificationRow, recipients: readonly BounceRecipient[]): Promise<IntakeResult> {
    const address = suppressionKey(row.recipient);
    // The report's line for this message's recipient; a report naming only others is not about it.
    const line =
      recipients.find((r) => r.recipient !== null && suppressionKey(r.recipient) === address) ??
      (recipients.length === 1 && recipients[0]!.recipient === null ? recipients[0] : undefined) ??
      recipients.find((r) => r.recipient === null);
    const severity = line === undefined ? null : bounceSeverity(line);
    if (line === undefined || severity === null)
      return {
        outcome: 'ignored',
        requestId: row.request_id,
        why: 'the report shows no failure for the recipient',
      };
    const diagnostic = (line.diagnostic ?? line.status ?? 'no diagnostic given').slice(0, MAX_DIAGNOSTIC);
    const bounce = { type: severity, status: line.status, diagnostic };
    const now = this.now();
    return this.db.transaction().execute(async (tx) => {
      let current = row;
      if (severity === 'hard') {
        // The conditional update decides, not the row read before: of two copies of a report
        // applied at once, the second finds the message already failed and changes nothing.
        const failed = await markBounced(tx, row.id, `Bounced: ${diagnostic}`, now);
        current = failed ?? (await findNotificationById(tx, row.id)) ?? row;
        if (failed === undefined && current.bounced_at !== null)
          return { outcome: 'ignored' as const, requestId: row.request_id, why: 'already bounced' };
        if (failed !== undefined) {
          await addUsage(tx, [
            { projectId: row.project_id, createdAt: row.created_at, state: 'sent', delta: -1 },
            { projectId: row.project_id, createdAt: row.created_at, state: 'failed', delta: 1 },
          ]);
        }
        if (address !== null && provesBadMailbox(line.status))
          await addSuppressions(tx, [
            {
              projectId: row.project_id,
              email: address,
              reason: 'hard_bounce',
              requestId: row.request_id,
              detail: diagnostic,
              now,
            },
          ]);
      }
      await recordEvents(tx, [
        {
          projectId: row.project_id,
          notificationId: row.id,
          type: 'notification.bounced',
          data: { ...statusBody(current), bounce },
          at: now,
        },
      ]);
      return {
        outcome: severity === 'hard' ? ('bounced' as const) : ('soft_bounce' as const),
        requestId: row.request_id,
      };
    });
  }

  private async complaint(row: NotificationRow, feedbackType: string): Promise<IntakeResult> {
    const address = suppressionKey(row.recipient);
    const now = this.now();
    return this.db.transaction().execute(async (tx) => {
      // A reporter resends a report it got no 250 for: the first copy counts, later ones change
      // nothing and emit no second event (the conditional update decides, as for bounces).
      if (!(await markComplained(tx, row.id, now)))
        return { outcome: 'ignored' as const, requestId: row.request_id, why: 'already complained' };
      if (address !== null)
        await addSuppressions(tx, [
          {
            projectId: row.project_id,
            email: address,
            reason: 'complaint',
            requestId: row.request_id,
            detail: `Feedback-Type: ${feedbackType}`.slice(0, MAX_DIAGNOSTIC),
            now,
          },
        ]);
      await recordEvents(tx, [
        {
          projectId: row.project_id,
          notificationId: row.id,
          type: 'notification.complained',
          data: { ...statusBody(row), complaint: { feedback_type: feedbackType.slice(0, 100) } },
          at: now,
        },
      ]);
      return { outcome: 'complained' as const, requestId: row.request_id };
    });
  }
}
