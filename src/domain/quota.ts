import { errors } from './errors.js';

export type QuotaPeriod = 'hour' | 'day' | 'month';
export const QUOTA_PERIODS: readonly QuotaPeriod[] = ['hour', 'day', 'month'];
/** The largest quota a project can have; beyond it a project is simply unlimited. */
export const MAX_QUOTA_LIMIT = 1_000_000_000;

export function isQuotaPeriod(value: unknown): value is QuotaPeriod {
  return (QUOTA_PERIODS as readonly unknown[]).includes(value);
}

/** A quota as people write it: a whole number up to MAX_QUOTA_LIMIT, or `unlimited` (null). */
export function parseQuotaLimit(raw: string): number | null | undefined {
  if (raw === 'unlimited') return null;
  return /^\d{1,10}$/.test(raw) && Number(raw) <= MAX_QUOTA_LIMIT ? Number(raw) : undefined;
}

/** Throws unless `period` is a quota period. */
export function checkQuotaPeriod(period: string): QuotaPeriod {
  if (isQuotaPeriod(period)) return period;
  throw errors.invalidInput('Quota period must be hour, day or month');
}

/** Throws unless `limit` is a quota a project can have (null: unlimited). */
export function checkQuotaLimit(limit: number | null): number | null {
  if (limit !== null && !(Number.isInteger(limit) && limit >= 0 && limit <= MAX_QUOTA_LIMIT))
    throw errors.invalidInput(`Quota must be a whole number up to ${MAX_QUOTA_LIMIT}, or unlimited`);
  return limit;
}

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
  /** Accepted sends counted in this window: more than `limit` once the limit was lowered below it. */
  readonly used: number;
  readonly remaining: number;
  /** Epoch seconds at which the window resets. */
  readonly reset: number;
}

export function quotaState(limit: number, used: number, window: QuotaWindow): QuotaState {
  return { limit, used, remaining: Math.max(0, limit - used), reset: Math.floor(window.end / 1000) };
}
