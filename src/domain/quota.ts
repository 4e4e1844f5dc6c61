import type { QuotaPeriod } from '../config.js';

/**
 * Quotas count accepted sends in fixed UTC calendar windows. A window is identified by its start
 * (epoch ms), which is also the key of the usage counter in the store.
 */

export interface QuotaWindow {
  readonly start: number;
  readonly end: number;
}

export function quotaWindow(period: QuotaPeriod, now: number): QuotaWindow {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  switch (period) {
    case 'hour': {
      const start = Date.UTC(y, m, d.getUTCDate(), d.getUTCHours());
      return { start, end: start + 3_600_000 };
    }
    case 'day': {
      const start = Date.UTC(y, m, d.getUTCDate());
      return { start, end: start + 86_400_000 };
    }
    case 'month':
      return { start: Date.UTC(y, m, 1), end: Date.UTC(y, m + 1, 1) };
  }
}

export interface QuotaState {
  readonly limit: number;
  readonly remaining: number;
  /** Epoch seconds at which the window resets. */
  readonly reset: number;
}

export function quotaState(limit: number, used: number, window: QuotaWindow): QuotaState {
  return { limit, remaining: Math.max(0, limit - used), reset: Math.floor(window.end / 1000) };
}
