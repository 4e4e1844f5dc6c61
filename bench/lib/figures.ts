/**
 * Turns measurements into the figures the report prints: one row per figure with Herald's value,
 * its baseline, the ratio, the goal and whether it was met; and the bars of the chart.
 */
import type { ChartItem } from './chart.js';
import {
  GOALS,
  type BatchRun,
  type BenchResults,
  type DeliveryResult,
  type EndToEndResult,
} from './results.js';
import { formatMs, formatNumber } from './stats.js';
import type { WrkResult } from './wrk.js';

export interface Row {
  figure: string;
  herald: string;
  baseline: string;
  ratio: string;
  goal: string;
  /** undefined: there is no goal, or the figure was not measured. */
  met: boolean | undefined;
}

export const NOT_MEASURED = 'not measured';

function rate(result: WrkResult | undefined, unit = 'req/s'): string {
  if (result === undefined) return NOT_MEASURED;
  return `${formatNumber(result.rps)} ${unit} (p50 ${formatMs(result.p50Ms)}, p99 ${formatMs(result.p99Ms)})`;
}

function batchRate(run: BatchRun | undefined, unit: string): string {
  if (run === undefined) return NOT_MEASURED;
  return `${formatNumber(run.rate)} ${unit} (p50 ${formatMs(run.p50Ms)}, p99 ${formatMs(run.p99Ms)} per batch)`;
}

function ratioRow(
  figure: string,
  herald: number | undefined,
  baseline: number | undefined,
  texts: { herald: string; baseline: string },
  goal: number,
): Row {
  if (herald === undefined || baseline === undefined || baseline === 0) {
    return { figure, ...texts, ratio: '–', goal: `≥ ${goal}`, met: undefined };
  }
  const ratio = herald / baseline;
  return { figure, ...texts, ratio: ratio.toFixed(2), goal: `≥ ${goal}`, met: ratio >= goal };
}

function deliveryRow(figure: string, delivery: DeliveryResult | undefined, goal: number): Row {
  const heraldText =
    delivery?.heraldRate === undefined
      ? NOT_MEASURED
      : `${formatNumber(delivery.heraldRate)} msgs/s${delivery.timedOut === true ? ' (timed out)' : ''}`;
  return ratioRow(
    figure,
    delivery?.timedOut === true ? undefined : delivery?.heraldRate,
    delivery?.sourceRate,
    {
      herald: heraldText,
      baseline:
        delivery?.sourceRate === undefined
          ? NOT_MEASURED
          : `smtp-source -s ${delivery.sessions} ${formatNumber(delivery.sourceRate)} msgs/s`,
    },
    goal,
  );
}

export function peakRssMb(results: BenchResults): number | undefined {
  const values = [
    results.accept?.rssMb.sqlite,
    results.accept?.rssMb.postgres,
    results.delivery?.rssMb.fill,
    results.delivery?.rssMb.worker,
  ].filter((v): v is number => v !== undefined && v > 0);
  return values.length === 0 ? undefined : Math.max(...values);
}

export function figureRows(results: BenchResults): Row[] {
  const { accept, delivery, endToEnd, growth, batch } = results;
  const rows: Row[] = [];
  const bare = accept?.bare;
  rows.push(
    ratioRow(
      'Accept, SQLite',
      accept?.sqlite?.rps,
      bare?.rps,
      { herald: rate(accept?.sqlite), baseline: `bare node:http ${rate(bare)}` },
      GOALS.acceptSqlite,
    ),
  );
  const pgRow = ratioRow(
    'Accept, PostgreSQL',
    accept?.postgres?.rps,
    bare?.rps,
    { herald: accept?.postgresSkipped ?? rate(accept?.postgres), baseline: `bare node:http ${rate(bare)}` },
    GOALS.acceptPostgres,
  );
  rows.push(pgRow);
  rows.push(
    ratioRow(
      `Batch accept, SQLite (${batch?.size ?? results.settings.batchSize} per batch)`,
      batch?.herald?.rate,
      batch?.baseline?.rate,
      {
        herald: batchRate(batch?.herald, 'notifications/s'),
        baseline: `bare SQLite insert ${batchRate(batch?.baseline, 'rows/s')}`,
      },
      GOALS.batch,
    ),
  );
  rows.push(
    deliveryRow(
      `Delivery, ${formatNumber(delivery?.count ?? results.settings.deliveryCount)} messages`,
      delivery,
      GOALS.delivery,
    ),
  );
  const stored = formatNumber(growth?.stored ?? results.settings.storedCount);
  rows.push(
    ratioRow(
      `Accept with ${stored} stored`,
      growth?.storedAccept?.rps,
      growth?.emptyAccept?.rps,
      { herald: rate(growth?.storedAccept), baseline: `empty database ${rate(growth?.emptyAccept)}` },
      GOALS.growth,
    ),
  );
  const lookupRatio =
    growth?.storedLookup !== undefined && growth.emptyLookup !== undefined
      ? (growth.storedLookup.p99Ms / growth.emptyLookup.p99Ms).toFixed(2)
      : '–';
  rows.push({
    figure: `Status lookup p99 with ${stored} stored`,
    herald:
      growth?.storedLookup === undefined
        ? NOT_MEASURED
        : `${formatMs(growth.storedLookup.p99Ms)} (${rate(growth.storedLookup)})`,
    baseline:
      growth?.emptyLookup === undefined
        ? NOT_MEASURED
        : `empty database ${formatMs(growth.emptyLookup.p99Ms)}`,
    ratio: lookupRatio,
    goal: '–',
    met: undefined,
  });
  const endToEndRuns = endToEnd === undefined || endToEnd.length === 0 ? [undefined] : endToEnd;
  for (const run of endToEndRuns) {
    rows.push({
      figure: `End to end, accept→sent${run === undefined ? '' : ` at ${formatNumber(run.rate)} req/s, ${run.processes === 'all' ? 'role all' : 'api and worker processes'}`}`,
      herald:
        run === undefined
          ? NOT_MEASURED
          : `p50 ${formatMs(run.acceptToSent.p50Ms)}, p99 ${formatMs(run.acceptToSent.p99Ms)}`,
      baseline: run === undefined ? '–' : `(${run.basis})`,
      ratio: '–',
      ...(run?.sustained === true ? latencyGoal(run) : { goal: '–', met: undefined }),
    });
  }
  rows.push(
    deliveryRow(
      `Delivery through a slow relay (1 s per message), ${formatNumber(results.slowRelay?.count ?? results.settings.slowRelayCount)} messages`,
      results.slowRelay,
      GOALS.slowRelay,
    ),
  );
  const files = results.files;
  const kib = `${(files?.fileBytes ?? 262_144) / 1024} KiB`;
  for (const [backend, run, skipped] of [
    ['SQLite', files?.sqlite, undefined],
    ['PostgreSQL', files?.postgres, files?.postgresSkipped],
  ] as const) {
    rows.push({
      figure: `Accept with a ${kib} file, ${backend}`,
      herald: skipped ?? rate(run),
      baseline: `bare node:http ${rate(files?.bare)}`,
      ratio: run === undefined || files?.bare === undefined ? '–' : (run.rps / files.bare.rps).toFixed(2),
      goal: '–',
      met: undefined,
    });
  }
  const rss = peakRssMb(results);
  rows.push({
    figure: 'Peak RSS (accept, delivery)',
    herald: rss === undefined ? NOT_MEASURED : `${formatNumber(rss, 1)} MB`,
    baseline: '–',
    ratio: '–',
    goal: `≤ ${GOALS.peakRssMb} MB`,
    met: rss === undefined ? undefined : rss <= GOALS.peakRssMb,
  });
  return rows;
}

export function chartItems(results: BenchResults): ChartItem[] {
  const { accept, delivery, growth, batch } = results;
  const items: ChartItem[] = [];
  const bare = accept?.bare?.rps;
  const ratioGoal = (baseline: number, goal: number) => ({
    value: baseline * goal,
    label: `goal ≥ ${goal}× baseline`,
  });
  if (accept?.sqlite !== undefined && bare !== undefined) {
    items.push({
      title: 'Accept throughput, SQLite',
      unit: 'req/s',
      herald: { label: 'Herald (SQLite)', value: accept.sqlite.rps },
      baseline: { label: 'bare node:http', value: bare },
      goal: ratioGoal(bare, GOALS.acceptSqlite),
      higherIsBetter: true,
    });
  }
  if (accept?.postgres !== undefined && bare !== undefined) {
    items.push({
      title: 'Accept throughput, PostgreSQL',
      unit: 'req/s',
      herald: { label: 'Herald (PostgreSQL)', value: accept.postgres.rps },
      baseline: { label: 'bare node:http', value: bare },
      goal: ratioGoal(bare, GOALS.acceptPostgres),
      higherIsBetter: true,
    });
  }
  if (batch?.herald !== undefined && batch.baseline !== undefined) {
    items.push({
      title: `Batch accept throughput, SQLite (${batch.size} per batch)`,
      unit: 'notifications/s',
      herald: { label: 'Herald (SQLite)', value: batch.herald.rate },
      baseline: { label: 'bare SQLite insert', value: batch.baseline.rate },
      goal: ratioGoal(batch.baseline.rate, GOALS.batch),
      higherIsBetter: true,
    });
  }
  if (delivery?.heraldRate !== undefined && delivery.sourceRate !== undefined) {
    items.push({
      title: `Delivery throughput, ${formatNumber(delivery.count)} messages`,
      unit: 'msgs/s',
      herald: { label: 'Herald worker', value: delivery.heraldRate },
      baseline: { label: 'smtp-source', value: delivery.sourceRate },
      goal: ratioGoal(delivery.sourceRate, GOALS.delivery),
      higherIsBetter: true,
    });
  }
  const slow = results.slowRelay;
  if (slow?.heraldRate !== undefined && slow.sourceRate !== undefined) {
    items.push({
      title: `Delivery through a slow relay, ${formatNumber(slow.count)} messages`,
      unit: 'msgs/s',
      herald: { label: 'Herald worker (defaults)', value: slow.heraldRate },
      baseline: { label: `smtp-source -s ${slow.sessions}`, value: slow.sourceRate },
      goal: ratioGoal(slow.sourceRate, GOALS.slowRelay),
      higherIsBetter: true,
    });
  }
  if (growth?.storedAccept !== undefined && growth.emptyAccept !== undefined) {
    items.push({
      title: `Accept throughput with ${formatNumber(growth.stored)} stored (SQLite)`,
      unit: 'req/s',
      herald: { label: `${formatNumber(growth.stored)} stored`, value: growth.storedAccept.rps },
      baseline: { label: 'empty database', value: growth.emptyAccept.rps },
      goal: ratioGoal(growth.emptyAccept.rps, GOALS.growth),
      higherIsBetter: true,
    });
  }
  const rss = peakRssMb(results);
  if (rss !== undefined) {
    items.push({
      title: 'Peak RSS of a Herald process',
      unit: 'MB',
      herald: { label: 'Herald peak', value: rss },
      baseline: { label: 'budget', value: GOALS.peakRssMb },
      goal: { value: GOALS.peakRssMb, label: `goal ≤ ${GOALS.peakRssMb} MB` },
      higherIsBetter: false,
    });
  }
  return items;
}

/** The latency goal of a run at a load the worker keeps up with. */
function latencyGoal(run: EndToEndResult): Pick<Row, 'goal' | 'met'> {
  const goal = GOALS.sustainedLatency;
  return {
    goal: `p50 ≤ ${goal.p50Ms} ms, p99 ≤ ${goal.p99Ms} ms`,
    met: run.acceptToSent.p50Ms <= goal.p50Ms && run.acceptToSent.p99Ms <= goal.p99Ms,
  };
}
