import type { Kysely } from 'kysely';
import { publicStatus } from '../domain/notification-state.js';
import { quotaState, quotaWindow } from '../domain/quota.js';
import { quotaUsed } from '../storage/quota.js';
import type { Database } from '../storage/schema.js';
import { lastActivity, USAGE_HOUR_MS, usageBuckets, usageTotals } from '../storage/usage.js';
import type { Project } from './projects.js';

export type UsageUnit = 'hour' | 'day';

const UNIT_MS: Record<UsageUnit, number> = { hour: USAGE_HOUR_MS, day: 24 * USAGE_HOUR_MS };

export interface QuotaUsage {
  readonly limit: number;
  readonly used: number;
  readonly remaining: number;
  /** The current quota window, [start, end) in epoch ms (fixed UTC calendar windows). */
  readonly windowStart: number;
  readonly windowEnd: number;
}

export interface ProjectUsage {
  /** null for an unlimited project. */
  readonly quota: QuotaUsage | null;
  readonly lastActivity: number | null;
}

export interface UsageBucket {
  readonly start: number;
  readonly sent: number;
  readonly failed: number;
  /** Waiting or being sent: `queued` and `sending` together. */
  readonly queued: number;
}

export interface UsageSeries {
  readonly unit: UsageUnit;
  readonly unitMs: number;
  readonly from: number;
  readonly to: number;
  readonly buckets: UsageBucket[];
  readonly totals: { readonly sent: number; readonly failed: number; readonly queued: number };
}

/** What the dashboard shows about a project's traffic: quota use, last activity, volume over time. */
export class UsageService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  async forProject(project: Project): Promise<ProjectUsage> {
    const [quota, last] = await Promise.all([this.quota(project), lastActivity(this.db, project.id)]);
    return { quota, lastActivity: last };
  }

  async quota(project: Project): Promise<QuotaUsage | null> {
    if (project.quotaLimit === null) return null;
    const window = quotaWindow(project.quotaPeriod, this.now());
    const { limit, used, remaining } = quotaState(
      project.quotaLimit,
      await quotaUsed(this.db, project.id, window.start),
      window,
    );
    return {
      limit,
      used,
      remaining,
      windowStart: window.start,
      windowEnd: window.end,
    };
  }

  /**
   * A project's messages by public state, all time: `queued` counts those waiting or being sent.
   * Read from the usage counters, so it costs the same with ten messages or ten million.
   */
  totals(projectId: number): Promise<{ queued: number; sent: number; failed: number }> {
    return usageTotals(this.db, projectId);
  }

  /** The last `count` whole hours or UTC days up to now (the current one included), oldest first. */
  async series(projectId: number, unit: UsageUnit, count: number): Promise<UsageSeries> {
    const unitMs = UNIT_MS[unit];
    const to = Math.floor(this.now() / unitMs) * unitMs + unitMs;
    const from = to - count * unitMs;
    const rows = await usageBuckets(this.db, projectId, from, to, unitMs);
    const buckets = Array.from({ length: count }, (_, i) => ({
      start: from + i * unitMs,
      sent: 0,
      failed: 0,
      queued: 0,
    }));
    const totals = { sent: 0, failed: 0, queued: 0 };
    for (const row of rows) {
      const bucket = buckets[Math.floor((row.bucket - from) / unitMs)];
      if (bucket === undefined) continue;
      const key = publicStatus(row.state);
      bucket[key] += row.count;
      totals[key] += row.count;
    }
    return { unit, unitMs, from, to, buckets, totals };
  }
}
