/**
 * Dashboard pages with a long history: `npm run bench:dashboard` (10,000,000 notifications per
 * backend; `-- --rows N` for another size, `-- --backend sqlite|postgres`). Seeds the rows with one
 * INSERT … SELECT on each backend, then times every dashboard page in-process through the app's
 * own `inject` (no network), five times after a warm-up, and prints the median and the slowest
 * with the same page on an empty database as the baseline. Writes bench/results/dashboard.md.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../src/config.js';
import { closeServices, openServices, type Services } from '../src/compose.js';
import { dashboardPlugin } from '../src/dashboard/plugin.js';
import { buildApp } from '../src/http/app.js';
import { createLogger } from '../src/logger.js';
import { bulkNotifications } from '../test/helpers/bulk-notifications.js';
import { createDatabase, findPostgres } from './lib/postgres.js';

const RUNS = 5;
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Options {
  rows: number;
  backends: ('sqlite' | 'postgres')[];
}

function parse(args: string[]): Options {
  const options: Options = { rows: 10_000_000, backends: ['sqlite', 'postgres'] };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--rows') options.rows = Number(args[++i]);
    else if (args[i] === '--backend') options.backends = [args[++i] as 'sqlite' | 'postgres'];
    else throw new Error(`unknown option ${args[i]}; use --rows N and --backend sqlite|postgres`);
  }
  if (!Number.isInteger(options.rows) || options.rows < 1) throw new Error('--rows must be a whole number');
  return options;
}

interface Timing {
  readonly page: string;
  readonly medianMs: number;
  readonly maxMs: number;
  readonly status: number;
}

async function time(app: FastifyInstance, session: string, url: string): Promise<Timing> {
  const once = async () => {
    const started = performance.now();
    const response = await app.inject({ url, cookies: { herald_session: session } });
    return { ms: performance.now() - started, status: response.statusCode };
  };
  await once();
  const runs = [];
  for (let i = 0; i < RUNS; i++) runs.push(await once());
  const sorted = runs.map((r) => r.ms).sort((a, b) => a - b);
  return {
    page: url,
    medianMs: sorted[Math.floor(RUNS / 2)]!,
    maxMs: sorted[RUNS - 1]!,
    status: runs[0]!.status,
  };
}

/** Every page of the dashboard, with the filters that used to scan. */
function pages(projectId: number, rows: number, requestId: string): string[] {
  return [
    '/projects',
    `/projects/${projectId}`,
    `/projects/${projectId}/usage?range=48h`,
    `/projects/${projectId}/usage?range=30d`,
    `/projects/${projectId}/usage?range=90d`,
    `/projects/${projectId}/templates`,
    `/projects/${projectId}/smtp`,
    '/messages',
    `/messages?project=${projectId}`,
    '/messages?status=failed',
    `/messages?recipient=user${Math.max(1, rows - 7)}%40example.org`,
    '/messages?recipient=nobody%40example.org',
    '/messages?template=user_created',
    `/messages/${requestId}`,
    '/api-logs',
    '/admins',
  ];
}

async function measure(
  kind: 'sqlite' | 'postgres',
  rows: number,
): Promise<{ empty: Timing[]; full: Timing[]; seedSeconds: number }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'herald-dashboard-bench-'));
  const env: Record<string, string> = { HERALD_DATA_DIR: dataDir, HERALD_SECRET_KEY: 'b'.repeat(64) };
  let dropPg: (() => Promise<void>) | null = null;
  if (kind === 'postgres') {
    const found = await findPostgres();
    if ('skip' in found) throw new Error(found.skip);
    const database = await createDatabase(found.baseUrl);
    env.HERALD_DATABASE_URL = database.url;
    dropPg = () => database.drop();
  }
  let services: Services | null = null;
  try {
    services = await openServices(loadConfig(env), createLogger('silent'));
    const svc = services;
    const app = await buildApp({ ...svc, plugins: [(instance) => dashboardPlugin(instance, svc)] });
    await app.ready();
    const admin = await svc.admins.create('bench@herald.example', 'a long enough password');
    const session = (await svc.admins.startSession(admin)).token;
    const { project } = await svc.projects.create({ name: 'bench', fromEmail: 'noreply@bench.example' });
    await svc.templates.create(project.id, {
      name: 'user_created',
      subject: 'Hi {{user_name}}',
      text: 'Hello',
    });

    await bulkNotifications(svc.storage.db, kind, project.id, 1);
    const empty = [];
    for (const url of pages(project.id, 1, 'bulk_1')) empty.push(await time(app, session, url));

    const started = performance.now();
    process.stdout.write(`${kind}: storing ${rows.toLocaleString('en-US')} notifications… `);
    await svc.storage.db.deleteFrom('notifications').execute();
    await svc.storage.db.deleteFrom('usage_deltas').execute();
    await bulkNotifications(svc.storage.db, kind, project.id, rows);
    if (kind === 'postgres') await (await import('kysely')).sql`ANALYZE`.execute(svc.storage.db);
    const seedSeconds = (performance.now() - started) / 1000;
    process.stdout.write(`${seedSeconds.toFixed(0)} s\n`);
    const full = [];
    for (const url of pages(project.id, rows, `bulk_${rows - 3}`)) full.push(await time(app, session, url));
    await app.close();
    return { empty, full, seedSeconds };
  } finally {
    if (services !== null) await closeServices(services);
    await dropPg?.();
    await rm(dataDir, { recursive: true, force: true });
  }
}

function table(kind: string, rows: number, result: Awaited<ReturnType<typeof measure>>): string {
  const lines = [
    `### ${kind}, ${rows.toLocaleString('en-US')} notifications (stored in ${result.seedSeconds.toFixed(0)} s)`,
    '',
    '| page | status | median | slowest of 5 | empty database, median |',
    '|---|---:|---:|---:|---:|',
  ];
  result.full.forEach((t, i) => {
    const base = result.empty[i]!;
    lines.push(
      `| \`${t.page}\` | ${t.status} | ${t.medianMs.toFixed(1)} ms | ${t.maxMs.toFixed(1)} ms | ${base.medianMs.toFixed(1)} ms |`,
    );
  });
  const worst = Math.max(...result.full.map((t) => t.medianMs));
  lines.push('', `Slowest page (median): ${worst.toFixed(1)} ms.`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const options = parse(process.argv.slice(2));
  const sections = [
    '# Dashboard pages with a long history',
    '',
    `\`npm run bench:dashboard\` on ${new Date().toISOString().slice(0, 10)}: each page timed in-process`,
    '(`inject`, no network), median of 5 after a warm-up, logged in as an admin.',
    '',
  ];
  for (const kind of options.backends) {
    const result = await measure(kind, options.rows);
    const text = table(kind, options.rows, result);
    console.log(`\n${text}\n`);
    sections.push(text, '');
  }
  const file = join(repoRoot, 'bench', 'results', 'dashboard.md');
  await writeFile(file, sections.join('\n'));
  console.log(`written to ${file}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
