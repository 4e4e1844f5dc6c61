/**
 * The bounce categories of product.md §9, fixed names. Every failure a report describes, and every
 * refusal a relay gives during the SMTP transaction, gets exactly one.
 */
export const BOUNCE_CATEGORIES = [
  'user_unknown',
  'host_unknown',
  'has_moved',
  'mailbox_full',
  'message_too_big',
  'expired',
  'blocked',
  'rejected',
  'policy',
  'spam',
  'virus',
  'auth_failure',
  'suspended',
  'rate_limited',
  'network_error',
  'system_error',
  'other',
] as const;

export type BounceCategory = (typeof BOUNCE_CATEGORIES)[number];

/**
 * The categories that prove the address itself bad (product.md §9): only these, and complaints,
 * put an address on the suppression list. Everything else fails a message and leaves the address.
 */
export const HARD_CATEGORIES: ReadonlySet<BounceCategory> = new Set([
  'user_unknown',
  'host_unknown',
  'has_moved',
]);

/** 'hard' = the address is bad and is suppressed; 'soft' = this message failed, the address stays. */
export type BounceType = 'hard' | 'soft';

/** The `bounce` object of product.md §9: the status body, `notification.bounced` and `.failed`. */
export interface BounceVerdict {
  readonly type: BounceType;
  readonly category: BounceCategory;
  /** Enhanced status code (RFC 3463) such as '5.1.1', or null when the failure gave none. */
  readonly status: string | null;
  /** What the remote server or the reporting MTA said, unfolded, at most 500 characters. */
  readonly diagnostic: string;
}

export function isBounceCategory(value: unknown): value is BounceCategory {
  return typeof value === 'string' && (BOUNCE_CATEGORIES as readonly string[]).includes(value);
}
