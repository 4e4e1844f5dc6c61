/** Percentiles and number formatting shared by the scenarios and the report. */

/** Nearest-rank percentile of `values` (need not be sorted); Infinity entries stand for "never". */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

export function formatNumber(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return value > 0 ? '∞' : '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return ms > 0 ? 'never' : '–';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}
