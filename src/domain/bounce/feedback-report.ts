import type { BounceCategory, BounceType } from './categories.js';

/**
 * What a message that came back to the bounce address says: facts and their classification only;
 * what to do with them (fail the message, suppress the address) is the caller's decision.
 */

export interface BounceRecipient {
  /** The recipient the report is about (Final-Recipient, or as the format names it); null when it names none. */
  readonly recipient: string | null;
  /** 'failed' | 'delayed' | 'delivered' | 'relayed' | 'expanded' (RFC 3464 §2.3.3), or null. */
  readonly action: string | null;
  /** Enhanced status code like '5.1.1' (the Status field, or the more specific one in the diagnostic), or null. */
  readonly status: string | null;
  /** What the remote server or the reporting MTA said, unfolded, trimmed, at most 500 characters; null when nothing. */
  readonly diagnostic: string | null;
  /** The category of product.md §9. */
  readonly category: BounceCategory;
  /** 'hard' only when the failure is final and proves the address bad (user_unknown, host_unknown, has_moved). */
  readonly type: BounceType;
  /** The remote server's SMTP reply code, or null when the report gives none. */
  readonly replyCode: number | null;
}

export type FeedbackReport =
  | {
      readonly kind: 'bounce';
      readonly recipients: readonly BounceRecipient[];
      readonly originalMessageId: string | null;
    }
  | {
      readonly kind: 'complaint';
      readonly feedbackType: string;
      readonly recipient: string | null;
      readonly originalMessageId: string | null;
    }
  | { readonly kind: 'unknown' };

/** More recipients than this in one report is not a bounce of a one-recipient notification. */
export const MAX_RECIPIENTS = 100;

/**
 * 'hard' = permanent (Action failed, or no Action and status 5.x.x), 'soft' = transient (Action
 * delayed, or no Action and 4.x.x), null = not a failure. This is whether the message failed; whether
 * the address is bad is the recipient's `type`. Action decides when present: RFC 3464 §2.3.3 makes it
 * required, and an MTA that gives up after retrying reports `failed` with a 4.x.x status (the message
 * is lost, though the mailbox may be fine).
 */
export function bounceSeverity(
  recipient: Pick<BounceRecipient, 'action' | 'status'>,
): 'hard' | 'soft' | null {
  switch (recipient.action) {
    case 'failed':
      return 'hard';
    case 'delayed':
      return 'soft';
    case null:
      break;
    default:
      return null;
  }
  const statusClass = recipient.status?.[0];
  return statusClass === '5' ? 'hard' : statusClass === '4' ? 'soft' : null;
}
