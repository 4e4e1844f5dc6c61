import type { QuotaUsage, UsageSeries } from '../services/usage.js';
import { helpers } from './format.js';

/**
 * Geometry of the usage pictures, computed here so the views only draw: a stacked bar chart of
 * sent / failed / queued per hour or day, and a meter of the quota window. Both render as inline
 * SVG styled by classes from app.css (no inline script or style needed).
 */

export interface BarSegment {
  readonly kind: 'sent' | 'failed' | 'queued';
  readonly y: number;
  readonly height: number;
}

export interface Bar {
  readonly x: number;
  readonly width: number;
  readonly segments: BarSegment[];
  /** Tooltip and accessible text, e.g. "Mar 5: 12 sent, 1 failed, 0 queued". */
  readonly label: string;
}

export interface BarChart {
  readonly width: number;
  readonly height: number;
  readonly plot: {
    readonly left: number;
    readonly top: number;
    readonly right: number;
    readonly bottom: number;
  };
  readonly bars: Bar[];
  readonly yTicks: { readonly y: number; readonly label: string }[];
  readonly xLabels: { readonly x: number; readonly label: string }[];
  readonly summary: string;
}

/** A round step (1, 2 or 5 × 10^k) giving at most `count` intervals up to `max`. */
function niceStep(max: number, count: number): number {
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  return Math.max(1, step);
}

export function barChart(series: UsageSeries, width = 960, height = 260): BarChart {
  const plot = { left: 52, top: 12, right: width - 12, bottom: height - 30 };
  const totals = series.buckets.map((b) => b.sent + b.failed + b.queued);
  const step = niceStep(Math.max(1, ...totals), 4);
  const top = Math.max(step, Math.ceil(Math.max(1, ...totals) / step) * step);
  const scale = (plot.bottom - plot.top) / top;
  const band = (plot.right - plot.left) / Math.max(1, series.buckets.length);
  const barWidth = Math.max(1, band * 0.72);
  const label = (start: number) =>
    series.unit === 'day' ? helpers.day(start) : `${helpers.day(start)} ${helpers.hour(start)}`;

  const bars = series.buckets.map((bucket, i) => {
    let y = plot.bottom;
    const segments: BarSegment[] = [];
    for (const kind of ['sent', 'failed', 'queued'] as const) {
      const value = bucket[kind];
      if (value === 0) continue;
      const h = value * scale;
      y -= h;
      segments.push({ kind, y: round(y), height: round(h) });
    }
    return {
      x: round(plot.left + i * band + (band - barWidth) / 2),
      width: round(barWidth),
      segments,
      label: `${label(bucket.start)}: ${bucket.sent} sent, ${bucket.failed} failed, ${bucket.queued} queued`,
    };
  });

  const yTicks = [];
  for (let value = 0; value <= top; value += step)
    yTicks.push({ y: round(plot.bottom - value * scale), label: helpers.num(value) });

  const every = Math.max(1, Math.ceil(series.buckets.length / 8));
  const xLabels = series.buckets
    .map((bucket, i) => ({ i, bucket }))
    .filter(({ i }) => i % every === 0)
    .map(({ i, bucket }) => ({
      x: round(plot.left + i * band + band / 2),
      label: series.unit === 'day' ? helpers.day(bucket.start) : helpers.hour(bucket.start),
    }));

  const { sent, failed, queued } = series.totals;
  const span = `${series.buckets.length} ${series.unit === 'day' ? 'days' : 'hours'}`;
  return {
    width,
    height,
    plot,
    bars,
    yTicks,
    xLabels,
    summary: `Messages per ${series.unit} over the last ${span}: ${sent} sent, ${failed} failed, ${queued} queued.`,
  };
}

export interface QuotaMeter {
  readonly width: number;
  readonly usedWidth: number;
  /** Where "now" falls in the window, as an x position: usage to the right of it is ahead of pace. */
  readonly nowX: number;
  readonly level: 'ok' | 'warn' | 'full';
  readonly usedPercent: number;
  readonly elapsedPercent: number;
}

export function quotaMeter(quota: QuotaUsage, now: number, width = 600): QuotaMeter {
  const usedFraction = quota.limit === 0 ? 1 : Math.min(1, quota.used / quota.limit);
  const elapsed = Math.min(1, Math.max(0, (now - quota.windowStart) / (quota.windowEnd - quota.windowStart)));
  return {
    width,
    usedWidth: round(usedFraction * width),
    nowX: round(elapsed * width),
    level: usedFraction >= 1 ? 'full' : usedFraction >= 0.8 ? 'warn' : 'ok',
    usedPercent: Math.round(usedFraction * 100),
    elapsedPercent: Math.round(elapsed * 100),
  };
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
