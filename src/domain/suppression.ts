import { parseMailbox } from './address.js';

/**
 * The suppression rules (product.md §5): which failures prove a mailbox is bad, and how addresses
 * are compared.
 */

export type SuppressionReason = 'hard_bounce' | 'complaint' | 'manual';

export const SUPPRESSION_REASONS: readonly SuppressionReason[] = ['hard_bounce', 'complaint', 'manual'];

/** The address a suppression entry is kept under: the bare address, lowercased; null if not one. */
export function suppressionKey(recipient: string): string | null {
  return parseMailbox(recipient)?.address.toLowerCase() ?? null;
}

export function suppressedMessage(reason: SuppressionReason): string {
  return `Recipient is suppressed (${reason})`;
}

// RFC 3463 §2: class.subject.detail, class 2, 4 or 5, subject and detail of 1–3 digits. Not part of
// a longer token such as an IP address (192.0.2.1), a version (1.2.3.4, v5.1.1) or `5.1.1a`; a
// hyphen may precede it: `550-5.1.1` is a line of a multiline reply (RFC 5321 §4.2).
const ENHANCED_STATUS = /(?<![\w.])([245]\.\d{1,3}\.\d{1,3})(?!\.?\w)/;
/** A folded header field's worth of text: a status code is near the start of a reply. */
const MAX_SCAN = 4 * 998;

/** The enhanced status code in a reply such as `550 5.1.1 <x@y>: Recipient address rejected`. */
export function enhancedStatusIn(text: string): string | null {
  if (typeof text !== 'string') return null;
  return ENHANCED_STATUS.exec(text.slice(0, MAX_SCAN))?.[1] ?? null;
}

const BAD_MAILBOX = new Set(['5.1.1', '5.1.10', '5.2.1']);

/**
 * Statuses that prove the mailbox itself is bad: 5.1.1 (no such user), 5.1.10 (null MX / no such
 * recipient domain, RFC 7505) and 5.2.1 (mailbox disabled). Policy and content rejections (5.7.x)
 * and everything else fail a message without suppressing the address.
 */
export function provesBadMailbox(status: string | null): boolean {
  return status !== null && BAD_MAILBOX.has(status);
}
