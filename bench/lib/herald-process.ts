/**
 * Herald as the bench sees it: the built CLI (`node bin/herald.js`), driven only through its fixed
 * interfaces (product.md §2): environment variables, `migrate`, `project create`, `template create`,
 * `serve --role`, and GET /healthz.
 */
import { existsSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { HOST, freePort, waitForHttp } from './net.js';
import { runCommand, spawnTracked, type Tracked } from './processes.js';
import { sampleRss } from './rss.js';

export interface HeraldCli {
  repoRoot: string;
  /** argv prefix: [node, bin/herald.js] */
  argv: [string, ...string[]];
  /** Node's options for `herald serve` (a CPU profile per process with --cpu-prof DIR). */
  serveNodeArgs: string[];
}

export class HeraldUnavailable extends Error {}

/** Builds Herald (`npm run build`) and checks that `herald --help` runs. */
export async function prepareHerald(
  repoRoot: string,
  options: { build: boolean; cpuProfileDir?: string },
): Promise<HeraldCli> {
  if (!existsSync(join(repoRoot, 'bin/herald.js'))) {
    throw new HeraldUnavailable('bin/herald.js does not exist yet (the service is not written)');
  }
  if (options.build) {
    try {
      await runCommand('npm', ['run', '--silent', 'build'], { cwd: repoRoot, timeoutMs: 300_000 });
    } catch (error) {
      throw new HeraldUnavailable((error as Error).message);
    }
  }
  const cli: HeraldCli = {
    repoRoot,
    argv: [process.execPath, join(repoRoot, 'bin/herald.js')],
    serveNodeArgs: options.cpuProfileDir ? ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir] : [],
  };
  try {
    await runCommand(cli.argv[0], [...cli.argv.slice(1), '--help'], { cwd: repoRoot, timeoutMs: 30_000 });
  } catch (error) {
    throw new HeraldUnavailable(`herald --help failed: ${(error as Error).message}`);
  }
  return cli;
}

export interface HeraldConfig {
  dataDir: string;
  port: number;
  smtpUrl?: string;
  databaseUrl?: string;
  secretKey: string;
}

export function newSecretKey(): string {
  return randomBytes(32).toString('hex');
}

/** The environment of every Herald command: the caller's, minus any HERALD_* or PORT it had. */
export function heraldEnv(config: HeraldConfig): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('HERALD_') && name !== 'PORT') env[name] = value;
  }
  Object.assign(env, {
    HERALD_DATA_DIR: config.dataDir,
    HERALD_PORT: String(config.port),
    HERALD_HOST: HOST,
    HERALD_SECRET_KEY: config.secretKey,
    HERALD_DEFAULT_QUOTA: 'unlimited',
  });
  if (config.smtpUrl !== undefined) env.HERALD_SMTP_URL = config.smtpUrl;
  if (config.databaseUrl !== undefined) env.HERALD_DATABASE_URL = config.databaseUrl;
  return env;
}

/** Runs `herald ARGS --json` and returns the JSON object it prints (the last JSON line wins). */
export async function heraldJson(cli: HeraldCli, config: HeraldConfig, args: string[]): Promise<unknown> {
  const { stdout } = await runCommand(cli.argv[0], [...cli.argv.slice(1), ...args, '--json'], {
    cwd: cli.repoRoot,
    env: heraldEnv(config),
    timeoutMs: 120_000,
  });
  const candidates = [stdout.trim(), ...stdout.trim().split('\n').reverse()];
  for (const text of candidates) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // not JSON: try the next candidate
    }
  }
  throw new Error(`herald ${args.join(' ')} --json printed no JSON: ${stdout.slice(0, 300)}`);
}

export interface BenchProject {
  id: number;
  apiKey: string;
  template: string;
}

/** `herald migrate`, a project with an unlimited quota and a from address, and the bench template. */
export async function setupHerald(cli: HeraldCli, config: HeraldConfig): Promise<BenchProject> {
  await runCommand(cli.argv[0], [...cli.argv.slice(1), 'migrate'], {
    cwd: cli.repoRoot,
    env: heraldEnv(config),
    timeoutMs: 120_000,
  });
  const project = (await heraldJson(cli, config, [
    'project',
    'create',
    '--name',
    'bench',
    '--quota',
    'unlimited',
    '--from-email',
    'bench@example.org',
    '--from-name',
    'Herald bench',
  ])) as { id?: unknown; api_key?: unknown };
  if (typeof project.api_key !== 'string') {
    throw new Error(`herald project create --json gave no api_key: ${JSON.stringify(project)}`);
  }
  await heraldJson(cli, config, [
    'template',
    'create',
    '--project',
    'bench',
    '--name',
    'welcome',
    '--subject',
    'Welcome {{user_name}}',
    '--text',
    'Hello {{user_name}}, your role is {{role}}.',
  ]);
  return { id: Number(project.id), apiKey: project.api_key, template: 'welcome' };
}

export type Role = 'all' | 'api' | 'worker';

export interface HeraldProcess {
  role: Role;
  port: number;
  process: Tracked;
  logFile: string;
  startupMs: number;
  /** Stops the process (SIGTERM, SIGKILL after 15 s) and returns its peak RSS in MB. */
  stop(): Promise<number>;
}

/**
 * Starts `herald serve --role ROLE` with its output in `logFile`. Roles with HTTP are ready once
 * GET /healthz answers 200; a worker is returned as soon as it is spawned.
 */
export async function startHerald(
  cli: HeraldCli,
  config: HeraldConfig,
  role: Role,
  logFile: string,
): Promise<HeraldProcess> {
  const fd = openSync(logFile, 'a');
  const started = performance.now();
  const child = spawnTracked(
    `herald serve --role ${role}`,
    cli.argv[0],
    [...cli.serveNodeArgs, ...cli.argv.slice(1), 'serve', '--role', role],
    {
      cwd: cli.repoRoot,
      env: heraldEnv(config),
      stdio: ['ignore', fd, fd],
    },
  );
  closeSync(fd);
  const rss = sampleRss(child.pid);
  const stop = async () => {
    const peak = rss.finish();
    await child.stop(15_000);
    return peak;
  };
  if (role !== 'worker') {
    try {
      await waitForHttp(config.port, '/healthz', { timeoutMs: 60_000, process: child });
    } catch (error) {
      await stop();
      throw new Error(`${(error as Error).message} (log: ${logFile})`);
    }
  }
  return { role, port: config.port, process: child, logFile, startupMs: performance.now() - started, stop };
}

export async function heraldConfig(dataDir: string, secretKey: string, extra: Partial<HeraldConfig> = {}) {
  return { dataDir, secretKey, port: await freePort(), ...extra } satisfies HeraldConfig;
}
