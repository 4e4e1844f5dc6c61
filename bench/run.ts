/**
 * Herald's benchmark suite: `npm run bench` (about 12 minutes) or `npm run bench -- --quick`
 * (about 4). Measures Herald against baselines run in the same session on the same machine,
 * prints a table and writes bench/results/latest.{md,svg,json}. See bench/lib/settings.ts for
 * the options and bench/scenarios/ for what each figure means.
 */
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HeraldUnavailable, newSecretKey, prepareHerald, type HeraldCli } from './lib/herald-process.js';
import { busyWarning, loadAverage, machineFacts } from './lib/machine.js';
import { findPostgres } from './lib/postgres.js';
import { cleanupAll, installSignalHandlers, isStopping, onCleanup } from './lib/processes.js';
import { progress } from './lib/progress.js';
import { consoleTable, writeReport } from './lib/report.js';
import type { BenchResults, Context, EndToEndResult } from './lib/results.js';
import { USAGE, parseSettings, type Settings } from './lib/settings.js';
import { INSTALL_HINT, hasPsql, missingTools } from './lib/tools.js';
import { runAccept } from './scenarios/accept.js';
import { runBatch } from './scenarios/batch.js';
import { runDelivery } from './scenarios/delivery.js';
import { runEndToEnd } from './scenarios/end-to-end.js';
import { FILE_BYTES, runFiles } from './scenarios/files.js';
import { runGrowth } from './scenarios/growth.js';
import { runSlowRelay, SLOW_RELAY_SESSIONS } from './scenarios/slow-relay.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const resultsDir = join(repoRoot, 'bench', 'results');

function commandLine(args: string[]): string {
  if (process.env.npm_lifecycle_event === 'bench')
    return `npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
  return `tsx bench/run.ts${args.length > 0 ? ` ${args.join(' ')}` : ''}`;
}

/** Deletes everything in `dir` but the logs (data directories can hold hundreds of MB). */
async function keepOnlyLogs(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && !entry.name.endsWith('.log'))
      await rm(join(entry.parentPath, entry.name), { force: true });
  }
}

async function heraldCli(settings: Settings): Promise<{ cli?: HeraldCli; missing?: string }> {
  progress.start(settings.build ? 'building Herald (npm run build)' : 'checking Herald');
  try {
    return {
      cli: await prepareHerald(resolve(settings.heraldRoot ?? repoRoot), {
        build: settings.build,
        cpuProfileDir: settings.cpuProfileDir && resolve(settings.cpuProfileDir),
      }),
    };
  } catch (error) {
    if (error instanceof HeraldUnavailable) return { missing: error.message };
    throw error;
  } finally {
    progress.stop();
  }
}

async function main(): Promise<number> {
  installSignalHandlers();
  const args = process.argv.slice(2);
  let parsed: Settings | 'help';
  try {
    parsed = parseSettings(args);
  } catch (error) {
    console.error(`bench: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (parsed === 'help') {
    console.log(USAGE);
    return 0;
  }
  const settings = parsed;
  const missing = missingTools();
  if (missing.length > 0) {
    console.error(`bench: missing ${missing.join(', ')}. Install with: ${INSTALL_HINT}`);
    return 1;
  }

  const results: BenchResults = {
    startedAt: new Date(),
    command: commandLine(args),
    settings,
    loadAtStart: loadAverage(),
    phaseSeconds: {},
    heraldMissing: undefined,
    problems: [],
  };
  const workDir = await mkdtemp(join(tmpdir(), 'herald-bench-'));
  // smtp-sink drops to user nobody, who must reach the dump files below the work directory.
  await chmod(workDir, 0o711);
  onCleanup(async () => {
    if (settings.keep) return console.error(`bench: kept ${workDir}`);
    if (results.problems.length === 0) return rm(workDir, { recursive: true, force: true });
    await keepOnlyLogs(workDir);
    console.error(`bench: Herald's logs of this run are in ${workDir}`);
  });

  const buildStarted = performance.now();
  const herald = await heraldCli(settings);
  results.phaseSeconds.build = (performance.now() - buildStarted) / 1000;
  results.heraldMissing = herald.missing;
  if (herald.missing !== undefined) progress.log(`bench: Herald is not measured: ${herald.missing}`);
  let postgres: Context['postgres'] = { skip: 'PostgreSQL: skipped (--no-pg)' };
  if (settings.postgres)
    postgres = hasPsql() ? await findPostgres() : { skip: 'PostgreSQL: psql is not installed' };
  const ctx: Context = {
    settings,
    repoRoot,
    workDir,
    herald: herald.cli,
    heraldMissing: herald.missing,
    secretKey: newSecretKey(),
    postgres,
  };

  const phase = async (name: string, fn: (problem: (message: string) => void) => Promise<void>) => {
    const problem = (message: string) => {
      results.problems.push({ phase: name, message });
      progress.log(`bench: ${name}: ${message}`);
    };
    const started = performance.now();
    try {
      await fn(problem);
    } catch (error) {
      problem((error as Error).message);
    } finally {
      progress.stop();
      results.phaseSeconds[name] = (performance.now() - started) / 1000;
      progress.log(`bench: ${name} took ${results.phaseSeconds[name].toFixed(0)} s`);
    }
  };
  const wants = (name: Settings['phases'][number]) => settings.phases.includes(name);

  if (wants('accept')) {
    await phase('accept', (problem) => runAccept(ctx, (results.accept = { rssMb: {} }), problem));
  }
  if (wants('delivery')) {
    const delivery = {
      count: settings.deliveryCount,
      sessions: settings.smtpSessions,
      sourcePayloadBytes: 0,
      rssMb: {},
    };
    await phase('delivery', (problem) => runDelivery(ctx, (results.delivery = delivery), problem));
  }
  if (wants('e2e')) {
    await phase('end to end', async () => {
      const acceptRps = results.accept?.sqlite?.rps;
      if (ctx.herald === undefined) return;
      if (acceptRps === undefined)
        throw new Error('not measured: it needs the SQLite accept figure of this run');
      const runs = (results.endToEnd = [] as EndToEndResult[]);
      const rate = Math.max(1, Math.round(acceptRps / 2));
      runs.push(await runEndToEnd(ctx, rate, 'half the measured SQLite accept rate', 'end-to-end', false));
      const deliveryRate = results.delivery?.heraldRate;
      if (deliveryRate !== undefined && deliveryRate < rate && results.delivery?.timedOut !== true) {
        // The delivery rate was measured with a worker process of its own: the deployment for
        // that load (docs/deployment.md) is an API process and a worker process, held to the
        // latency goal. Role `all` at the same rate shows what sharing one event loop costs.
        const sustained = Math.max(1, Math.round(deliveryRate / 2));
        const basis = 'half the measured delivery rate, a load the worker keeps up with';
        runs.push(await runEndToEnd(ctx, sustained, basis, 'end-to-end-split', true, 'api+worker'));
        runs.push(await runEndToEnd(ctx, sustained, basis, 'end-to-end-sustained', false, 'all'));
      }
    });
  }
  if (wants('growth')) {
    await phase('growth', async () => {
      if (ctx.herald === undefined) return;
      await runGrowth(ctx, (results.growth = { stored: settings.storedCount }));
    });
  }
  if (wants('batch')) {
    const batch = { size: settings.batchSize, connections: settings.batchConnections };
    await phase('batch', (problem) => runBatch(ctx, (results.batch = batch), problem));
  }
  if (wants('slow-relay')) {
    const slow = {
      count: settings.slowRelayCount,
      sessions: SLOW_RELAY_SESSIONS,
      sourcePayloadBytes: 0,
      rssMb: {},
    };
    await phase('slow relay', (problem) => runSlowRelay(ctx, (results.slowRelay = slow), problem));
  }

  if (wants('files')) {
    await phase('files', (problem) => runFiles(ctx, (results.files = { fileBytes: FILE_BYTES }), problem));
  }

  // Interrupted: the signal handler is cleaning up and exits; a partial report would mislead.
  if (isStopping()) return new Promise<number>(() => undefined);
  results.finishedAt = new Date();
  results.loadAtEnd = loadAverage();
  const machine = machineFacts();
  const report = await writeReport(results, machine, resultsDir);
  console.log(`\n${consoleTable(results)}\n`);
  const busy = busyWarning(results.loadAtStart, machine.nproc);
  if (busy !== undefined) console.log(`Warning: ${busy}.`);
  console.log(`Report: ${report} (chart: ${join(resultsDir, 'latest.svg')})`);
  await cleanupAll();
  return results.problems.length > 0 || results.heraldMissing !== undefined ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (error: unknown) => {
    progress.stop();
    console.error(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await cleanupAll();
    process.exit(1);
  },
);
