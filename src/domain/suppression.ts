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
