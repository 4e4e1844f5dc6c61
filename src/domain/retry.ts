/**
 * Retry policy for delivery. Transient failures (the relay is unreachable, slow, or answers 4xx)
 * are retried with exponential backoff and full jitter; permanent failures (5xx, missing template)
 * fail at once.
 */

export type FailureKind = 'transient' | 'permanent';

export interface DeliveryFailure {
  readonly kind: FailureKind;
  /** Stored as the notification's error_message, e.g. `SMTP 550 5.1.1 <x@y>: Recipient address rejected`. */
  readonly message: string;
  readonly smtpCode: number | null;
  /** The SMTP command the reply answered (`MAIL FROM`, `RCPT TO`, `DATA`, …), where known. */
  readonly command?: string | null;
}

/**
 * Delay before attempt `attempt + 1`, given that `attempt` attempts have been made (≥ 1).
 * The delay doubles each time from `baseMs`, capped at six hours, and is drawn uniformly from
 * [delay/2, delay] so that a burst of failures does not retry in lockstep.
 */
export function retryDelay(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), 6 * 3_600_000);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
