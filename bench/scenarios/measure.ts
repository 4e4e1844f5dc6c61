/** Helpers every scenario uses: a warmed-up wrk measurement, a data directory, a started Herald. */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { progress } from '../lib/progress.js';
import { runWrk, type WrkResult, type WrkTarget } from '../lib/wrk.js';
import {
  heraldConfig,
  setupHerald,
  startHerald,
  type BenchProject,
  type HeraldCli,
  type HeraldConfig,
  type HeraldProcess,
  type Role,
} from '../lib/herald-process.js';
import type { Context } from '../lib/results.js';
import type { Tracked } from '../lib/processes.js';

/**
 * A warm-up wrk run that is thrown away (JIT, caches, connection set-up), then the measured run.
 * When `server` is given and wrk fails because it is gone, the error says how the server ended.
 */
export async function measureWrk(
  ctx: Context,
  label: string,
  port: number,
  target: WrkTarget,
  server?: { process: Tracked; logFile?: string },
): Promise<WrkResult> {
  try {
    return await warmAndMeasure(ctx, label, port, target);
  } catch (error) {
    if (server?.process.hasExited() !== true) throw error;
    const log = server.logFile === undefined ? '' : ` (its log: ${server.logFile})`;
    throw new Error(
      `${label}: ${server.process.describeExit()}${log}; wrk said: ${(error as Error).message}`,
    );
  }
}

async function warmAndMeasure(
  ctx: Context,
  label: string,
  port: number,
  target: WrkTarget,
): Promise<WrkResult> {
  const { settings } = ctx;
  const name = label.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  const common = {
    port,
    target,
    threads: settings.threads,
    connections: settings.connections,
    workDir: ctx.workDir,
  };
  progress.start(`${label}: warm-up`, () => `wrk ${settings.warmupS}s`);
  await runWrk({ ...common, durationS: settings.warmupS, name: `${name}-warmup` });
  progress.start(
    `${label}: measuring`,
    () => `wrk -t${settings.threads} -c${settings.connections} -d${settings.durationS}s`,
  );
  const result = await runWrk({ ...common, durationS: settings.durationS, name });
  progress.stop();
  const bad = result.non2xx + result.socketErrors;
  if (bad > 0.01 * result.requests) {
    throw new Error(
      `${label}: ${result.non2xx} non-2xx responses and ${result.socketErrors} socket errors in ${result.requests} requests; the figure would be meaningless`,
    );
  }
  progress.log(`  ${label}: ${Math.round(result.rps)} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`);
  return result;
}

export interface Instance {
  cli: HeraldCli;
  config: HeraldConfig;
  project: BenchProject;
  dataDir: string;
}

/** A fresh data directory with Herald migrated, the bench project and its template. */
export async function prepareInstance(
  ctx: Context,
  name: string,
  extra: Partial<HeraldConfig> = {},
): Promise<Instance> {
  if (ctx.herald === undefined) throw new Error(`Herald is not available: ${ctx.heraldMissing ?? 'unknown'}`);
  const dataDir = join(ctx.workDir, name);
  await mkdir(dataDir, { recursive: true });
  const config = await heraldConfig(dataDir, ctx.secretKey, extra);
  progress.start(`${name}: herald migrate, project and template`);
  const project = await setupHerald(ctx.herald, config);
  progress.stop();
  return { cli: ctx.herald, config, project, dataDir };
}

export function startRole(
  ctx: Context,
  instance: Instance,
  role: Role,
  overrides: Partial<HeraldConfig> = {},
): Promise<HeraldProcess> {
  const config = { ...instance.config, ...overrides };
  const logFile = join(ctx.workDir, `${instance.dataDir.split('/').at(-1) ?? 'herald'}-${role}.log`);
  progress.start(`herald serve --role ${role}: starting`);
  return startHerald(instance.cli, config, role, logFile).finally(() => progress.stop());
}
