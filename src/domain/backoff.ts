/**
 * Exponential backoff for everything Herald retries. The delay before attempt `n + 1`, after `n`
 * attempts (n ≥ 1), doubles from `baseMs` up to `maxMs`, and is spread over `[low, high] ×` that
 * ceiling so that a burst of failures does not retry in lockstep.
 */
export interface Backoff {
  readonly baseMs: number;
  readonly maxMs: number;
  /** The ceiling is multiplied by a uniform draw from this range. */
  readonly spread: readonly [low: number, high: number];
}

/** No retry waits longer than six hours. */
export const MAX_RETRY_DELAY_MS = 6 * 3_600_000;

/**
 * Mail: "equal jitter", a draw from [ceiling/2, ceiling]. A message may go out sooner than the
 * doubling says, never later; the spread keeps a relay that refused many at once from getting
 * them back at once.
 */
export function deliveryBackoff(baseMs: number): Backoff {
  return { baseMs, maxMs: MAX_RETRY_DELAY_MS, spread: [0.5, 1] };
}

/**
 * Webhooks: the jitter only lengthens a delay (×[1, 1.2)), so the documented schedule is a lower
 * bound: with the defaults, retries span at least 29 hours.
 */
export function webhookBackoff(baseMs: number): Backoff {
  return { baseMs, maxMs: MAX_RETRY_DELAY_MS, spread: [1, 1.2] };
}

export function backoffDelay(attempt: number, backoff: Backoff, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.baseMs * 2 ** Math.max(0, attempt - 1), backoff.maxMs);
  const [low, high] = backoff.spread;
  return Math.round(ceiling * (low + random() * (high - low)));
}
