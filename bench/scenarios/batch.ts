/**
 * Figure 6, batch accept: notifications per second that Herald's role `api` on SQLite accepts
 * through POST /api/v1/notifications/batch (product.md §6), in batches of 500 from a few keep-alive
 * connections, against a bare better-sqlite3 insert of the same rows in the same run
 * (lib/bare-sqlite.ts: same pragmas, a table shaped like Herald's, one multi-row INSERT and one
 * transaction per batch). Both run for a warm-up that is not counted, then the measured run.
 *
 * Only a 202 listing every send as queued counts; any other answer ends the phase with that
 * answer, so the figure never includes rejected batches.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openBareSqlite, type BareSqlite } from '../lib/bare-sqlite.js';
import { batchItems, sendBatch, type SendItem } from '../lib/herald-api.js';
import type { HeraldProcess } from '../lib/herald-process.js';
import { keepAliveAgent } from '../lib/http-client.js';
import { progress } from '../lib/progress.js';
import type { BatchResult, BatchRun, Context } from '../lib/results.js';
import { formatMs, formatNumber, percentile } from '../lib/stats.js';
import { prepareInstance, startRole } from './measure.js';

/**
 * Distinct batches the client cycles through, built before the clock starts so that the client's
 * own JSON work stays out of the figure (Herald gives every send its own request_id anyway).
 */
const DISTINCT_BATCHES = 16;

interface Batch {
  items: SendItem[];
  body: string;
}

/** Stop starting batches after `durationS` or `maxBatches`, whichever comes first. */
interface Limits {
  durationS: number;
  maxBatches: number;
}

function buildBatches(size: number): Batch[] {
  return Array.from({ length: DISTINCT_BATCHES }, (_, i) => {
    const items = batchItems(i * size, size);
    return { items, body: JSON.stringify(items) };
  });
}

function summarize(latenciesMs: number[], size: number, seconds: number): BatchRun {
  const notifications = latenciesMs.length * size;
  return {
    batches: latenciesMs.length,
    notifications,
    seconds,
    rate: seconds > 0 ? notifications / seconds : 0,
    p50Ms: percentile(latenciesMs, 50),
    p99Ms: percentile(latenciesMs, 99),
  };
}

function describe(run: BatchRun, unit: string): string {
  return `${formatNumber(run.rate)} ${unit} (${formatNumber(run.batches)} batches in ${run.seconds.toFixed(2)} s, p50 ${formatMs(run.p50Ms)}, p99 ${formatMs(run.p99Ms)} per batch)`;
}

/**
 * `connections` lanes, each POSTing one batch at a time on its own keep-alive socket. The clock
 * runs until the last batch in flight has its answer, and every answered batch counts.
 */
async function postBatches(
  herald: HeraldProcess,
  apiKey: string,
  batches: Batch[],
  connections: number,
  limits: Limits,
  label: string,
): Promise<BatchRun> {
  const agent = keepAliveAgent(connections);
  const latencies: number[] = [];
  let started = 0;
  let failure: unknown;
  progress.start(label, () => `${formatNumber(latencies.length)} batches accepted`);
  const t0 = performance.now();
  const deadline = t0 + limits.durationS * 1000;
  const lane = async () => {
    while (failure === undefined && started < limits.maxBatches && performance.now() < deadline) {
      const batch = batches[started % batches.length]!;
      started += 1;
      const sent = performance.now();
      try {
        await sendBatch(agent, herald.port, apiKey, batch.body, batch.items.length);
        latencies.push(performance.now() - sent);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: connections }, lane));
  } finally {
    agent.destroy();
    progress.stop();
  }
  const seconds = (performance.now() - t0) / 1000;
  if (failure !== undefined) {
    const message = failure instanceof Error ? failure.message : String(failure);
    if (!herald.process.hasExited()) throw new Error(`${label}: ${message}`);
    throw new Error(
      `${label}: ${herald.process.describeExit()} (its log: ${herald.logFile}); the client said: ${message}`,
    );
  }
  return summarize(latencies, batches[0]?.items.length ?? 0, seconds);
}

/** Inserts batches one after the other; the clock covers building the rows and every commit. */
async function insertBatches(
  db: BareSqlite,
  batches: Batch[],
  limits: Limits,
  label: string,
): Promise<BatchRun> {
  const latencies: number[] = [];
  progress.start(label, () => `${formatNumber(latencies.length)} batches inserted`);
  const t0 = performance.now();
  const deadline = t0 + limits.durationS * 1000;
  let yielded = t0;
  try {
    while (latencies.length < limits.maxBatches && performance.now() < deadline) {
      const items = batches[latencies.length % batches.length]!.items;
      const started = performance.now();
      db.insertBatch(items);
      const done = performance.now();
      latencies.push(done - started);
      // better-sqlite3 is synchronous: give the progress line (and signals) a turn now and then.
      if (done - yielded >= 200) {
        await new Promise((resolve) => setImmediate(resolve));
        yielded = performance.now();
      }
    }
  } finally {
    progress.stop();
  }
  return summarize(latencies, batches[0]?.items.length ?? 0, (performance.now() - t0) / 1000);
}

async function measureHerald(ctx: Context, out: BatchResult, batches: Batch[]): Promise<void> {
  const { settings } = ctx;
  const instance = await prepareInstance(ctx, 'batch-sqlite');
  const herald = await startRole(ctx, instance, 'api');
  let stopped = false;
  try {
    const apiKey = instance.project.apiKey;
    const label = 'batch, Herald on SQLite';
    const post = (phase: string, durationS: number) =>
      postBatches(
        herald,
        apiKey,
        batches,
        out.connections,
        { durationS, maxBatches: settings.batchMaxBatches },
        `${label}: ${phase}`,
      );
    out.heraldWarmup = await post('warm-up', settings.warmupS);
    out.herald = await post('measuring', settings.durationS);
    progress.log(`  ${label}: ${describe(out.herald, 'notifications/s')}`);
    stopped = true;
    out.rssMb = await herald.stop();
  } finally {
    if (!stopped) await herald.stop();
  }
}

async function measureBaseline(ctx: Context, out: BatchResult, batches: Batch[]): Promise<void> {
  const { settings } = ctx;
  const dir = join(ctx.workDir, 'batch-bare-sqlite');
  await mkdir(dir, { recursive: true });
  const db = openBareSqlite(join(dir, 'bare.db'), out.size);
  try {
    const label = 'batch, bare SQLite insert';
    // The same rows as Herald accepted: as many batches in the warm-up and in the measured run, so
    // that both files are the same size when each run starts. The time bound only guards against
    // a disk that stalls; without a Herald figure, the baseline runs for Herald's durations.
    const sameAs = (run: BatchRun | undefined, durationS: number): Limits =>
      run === undefined
        ? { durationS, maxBatches: settings.batchMaxBatches }
        : { durationS: Math.max(30, 3 * run.seconds), maxBatches: run.batches };
    out.baselineWarmup = await insertBatches(
      db,
      batches,
      sameAs(out.heraldWarmup, settings.warmupS),
      `${label}: warm-up`,
    );
    const limits = sameAs(out.herald, settings.durationS);
    out.baseline = await insertBatches(db, batches, limits, `${label}: measuring`);
    out.baselineBasis =
      out.herald === undefined
        ? `for ${settings.durationS} s (Herald was not measured)`
        : out.baseline.batches === out.herald.batches
          ? 'the same batches as Herald accepted'
          : `${formatNumber(out.baseline.batches)} of Herald's ${formatNumber(out.herald.batches)} batches (stopped after ${limits.durationS.toFixed(0)} s)`;
    progress.log(`  ${label}: ${describe(out.baseline, 'rows/s')}`);
  } finally {
    db.close();
  }
}

export async function runBatch(
  ctx: Context,
  out: BatchResult,
  problem: (message: string) => void,
): Promise<void> {
  const batches = buildBatches(out.size);
  if (ctx.herald !== undefined) {
    try {
      await measureHerald(ctx, out, batches);
    } catch (error) {
      problem(`Herald: ${(error as Error).message}`);
    }
  }
  await measureBaseline(ctx, out, batches);
}
