import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_TYPES, renderMigrations } from '../../src/storage/migrations.js';
import { createPostgresDatabase } from '../helpers/database.js';
import {
  heraldJson,
  httpRequest,
  ProcessGroup,
  requestIdOf,
  runHerald,
  sendNotifications,
  type HeraldProcess,
  type HttpReply,
} from '../helpers/processes.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Scale-out on PostgreSQL with real processes: two `herald migrate` at once, then 2 api and 3
 * worker processes sharing one database. 5,000 notifications go through while one worker is
 * SIGKILLed holding leased messages: all end `sent`, none is lost, and the duplicates the kill
 * caused (messages in flight at the relay whose outcome was never recorded) are counted. A run
 * without a kill has none. Quota and key rotation hold across the api processes.
 */

const BULK = 5_000;
const CALM = 1_000;
const KILL_AFTER = 1_500;
/** Far longer than the test: a killed worker's mail comes back through its stopped heartbeat. */
const LEASE_MS = 600_000;

let database: { url: string; drop(): Promise<void> };
let dataDir: string;
let env: Record<string, string>;
let sink: SmtpSink;
let client: pg.Client;
const group = new ProcessGroup();
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
let apis: string[] = [];
let workers: HeraldProcess[] = [];

beforeAll(async () => {
  database = await createPostgresDatabase();
  dataDir = mkdtempSync(path.join(tmpdir(), 'herald-multi-'));
  sink = await new SmtpSink().start();
  env = {
    HERALD_DATABASE_URL: database.url,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: 'm'.repeat(64),
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_LEASE_MS: String(LEASE_MS),
    HERALD_DELIVERY_RETRY_BASE_MS: '200',
    HERALD_DELIVERY_POLL_MS: '100',
  };
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});

afterAll(async () => {
  // Whatever happened above: no Herald process outlives this file.
  await group.killAll();
  agent.destroy();
  await client?.end();
  await sink?.stop();
  await database?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function stateCounts(projectId: number): Promise<Record<string, number>> {
  const { rows } = await client.query<{ state: string; count: string }>(
    'SELECT state, count(*) AS count FROM notifications WHERE project_id = $1 GROUP BY state',
    [projectId],
  );
  return Object.fromEntries(rows.map((row) => [row.state, Number(row.count)]));
}

/** Waits until all `total` notifications of the project are `sent` (none failed on the way). */
async function waitAllSent(projectId: number, total: number, timeoutMs: number): Promise<void> {
  await waitUntil(
    async () => {
      const counts = await stateCounts(projectId);
      if ((counts.failed ?? 0) > 0) throw new Error(`notifications failed: ${JSON.stringify(counts)}`);
      return counts.sent === total ? true : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `${total} notifications of project ${projectId} to be sent` },
  );
}

/** The messages a worker process holds under a lease. */
async function leasedBy(worker: HeraldProcess): Promise<{ id: number; requestId: string }[]> {
  const { rows } = await client.query<{ id: string; request_id: string }>(
    "SELECT id, request_id FROM notifications WHERE state = 'sending' AND lease_owner LIKE $1",
    [`%:${worker.pid}:%`],
  );
  return rows.map((row) => ({ id: Number(row.id), requestId: row.request_id }));
}

/** Deliveries at the sink per request id, from message index `from` on. */
function deliveries(from = 0): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of sink.messages.slice(from)) {
    const id = String(message.parsed.headers.get('x-herald-request-id'));
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

function accepted(replies: readonly HttpReply[]): string[] {
  const statuses = new Map<number, number>();
  for (const reply of replies) statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
  expect(Object.fromEntries(statuses)).toEqual({ 202: replies.length });
  return replies.map(requestIdOf);
}

interface CreatedProject {
  id: number;
  name: string;
  api_key: string;
}

async function createProject(name: string, quota: string): Promise<CreatedProject> {
  const project = await heraldJson<CreatedProject>(
    [
      'project',
      'create',
      '--name',
      name,
      '--quota',
      quota,
      '--quota-period',
      'month',
      '--from-email',
      'noreply@herald.example',
    ],
    env,
  );
  await heraldJson(
    [
      'template',
      'create',
      '--project',
      name,
      '--name',
      'welcome',
      '--subject',
      'Hi {{user_name}}',
      '--text',
      'Hello {{user_name}}.',
    ],
    env,
  );
  return project;
}

describe('herald on PostgreSQL with several api and worker processes', () => {
  it(
    'two `herald migrate` at once both succeed and create the schema once',
    { timeout: 90_000 },
    async () => {
      const results = await Promise.all([
        runHerald(['migrate', '--json'], env),
        runHerald(['migrate', '--json'], env),
      ]);
      const applied: string[] = [];
      for (const result of results) {
        expect(result.stderr).toBe('');
        expect(result.code).toBe(0);
        const printed = JSON.parse(result.stdout) as { applied: string[] };
        expect(printed).toEqual({ migrated: true, database: 'postgres', applied: expect.any(Array) });
        applied.push(...printed.applied);
      }
      // One of them applied each migration, and said so.
      expect(applied.sort()).toEqual(Object.keys(renderMigrations(POSTGRES_TYPES)).sort());
      const migrations = await client.query<{ name: string }>('SELECT name FROM herald_migrations');
      expect(migrations.rows.map((row) => row.name).sort()).toEqual(
        Object.keys(renderMigrations(POSTGRES_TYPES)).sort(),
      );
      const tables = await client.query<{ tablename: string }>(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename = 'notifications'",
      );
      expect(tables.rowCount).toBe(1);
    },
  );

  describe('2 api + 3 worker processes', () => {
    let bulk: CreatedProject;
    let limited: CreatedProject;
    let rotating: CreatedProject;

    beforeAll(async () => {
      [bulk, limited, rotating] = await Promise.all([
        createProject('bulk', 'unlimited'),
        createProject('limited', '30'),
        createProject('rotating', 'unlimited'),
      ]);
      const started = await Promise.all([
        group.http('api-1', 'api', env),
        group.http('api-2', 'api', env),
        group.worker('worker-1', env),
        group.worker('worker-2', env),
        group.worker('worker-3', env),
      ]);
      apis = [started[0].url, started[1].url];
      workers = [started[2], started[3], started[4]];
    }, 120_000);

    it('two api processes share one quota exactly', { timeout: 60_000 }, async () => {
      const replies = await sendNotifications({
        urls: apis,
        apiKey: limited.api_key,
        count: 90,
        concurrency: 90,
        agent: new http.Agent({ keepAlive: false }),
      });
      const byStatus = (status: number) => replies.filter((reply) => reply.status === status);
      expect(byStatus(202)).toHaveLength(30);
      expect(byStatus(402)).toHaveLength(60);
      // Each unit of the quota went to exactly one request, whichever process took it.
      const remaining = byStatus(202).map((reply) => Number(reply.headers['x-quota-remaining']));
      expect(remaining.sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
      for (const reply of byStatus(402))
        expect(JSON.parse(reply.body)).toEqual({ error: 'Request quota exceeded' });
      const shown = await heraldJson<{ quota_used: number }>(['project', 'show', 'limited'], env);
      expect(shown.quota_used).toBe(30);
    });

    it(
      'a key rotated through the CLI is refused by every api process at once',
      { timeout: 60_000 },
      async () => {
        const status = (url: string, key: string) =>
          httpRequest(`${url}/api/v1/notifications/no-such-request`, {
            headers: { authorization: `Bearer ${key}` },
          }).then((reply) => reply.status);
        for (const url of apis) expect(await status(url, rotating.api_key)).toBe(404);

        const rotated = await heraldJson<{ api_key: string }>(['project', 'rotate-key', 'rotating'], env);
        expect(rotated.api_key).not.toBe(rotating.api_key);

        for (const url of apis) {
          expect(await status(url, rotating.api_key)).toBe(401);
          expect(await status(url, rotated.api_key)).toBe(404);
        }
        const sends = await sendNotifications({
          urls: apis,
          apiKey: rotating.api_key,
          count: 4,
          concurrency: 4,
        });
        expect(sends.map((reply) => reply.status)).toEqual([401, 401, 401, 401]);
        expect(JSON.parse(sends[0]!.body)).toEqual({ error: 'Invalid or missing API key' });
        const fresh = await sendNotifications({
          urls: apis,
          apiKey: rotated.api_key,
          count: 2,
          concurrency: 2,
        });
        expect(fresh.map((reply) => reply.status)).toEqual([202, 202]);
      },
    );

    it(
      `delivers ${BULK} notifications with a worker SIGKILLed mid-run: none lost`,
      { timeout: 240_000 },
      async () => {
        const victim = workers[0]!;
        const killed = (async () => {
          await sink.waitFor(KILL_AFTER, 180_000);
          // Kill it while it holds leased messages, so there is work for the others to reclaim.
          await waitUntil(async () => ((await leasedBy(victim)).length > 0 ? true : undefined), {
            timeoutMs: 30_000,
            intervalMs: 5,
            what: 'the victim worker to hold leases',
          }).catch(() => undefined);
          const atSink = sink.messages.length;
          victim.kill('SIGKILL');
          await victim.exited;
          // Read at once: nothing can change these rows until the victim's heartbeat is judged
          // stopped (seconds), let alone until their lease (LEASE_MS) expires.
          const orphaned = await leasedBy(victim);
          const killedAt = Date.now();
          // product.md §8: another worker picks the killed worker's messages up within 10 s.
          await waitUntil(async () => ((await leasedBy(victim)).length === 0 ? true : undefined), {
            timeoutMs: 10_000,
            intervalMs: 50,
            what: "another worker to take the killed worker's messages back within 10 s",
          });
          return { atSink, orphaned, takenBackMs: Date.now() - killedAt };
        })();

        const replies = await sendNotifications({
          urls: apis,
          apiKey: bulk.api_key,
          count: BULK,
          concurrency: 50,
          agent,
        });
        const ids = accepted(replies);
        expect(new Set(ids).size).toBe(BULK);
        const kill = await killed;
        await waitAllSent(bulk.id, BULK, 180_000);

        const stats = await heraldJson<Record<string, number>>(['stats', '--project', 'bulk'], env);
        expect(stats).toEqual({ queued: 0, sending: 0, sent: BULK, failed: 0 });

        const counts = deliveries();
        const lost = ids.filter((id) => !counts.has(id));
        expect(lost).toEqual([]);
        const duplicated = ids.filter((id) => counts.get(id)! > 1);
        const duplicates = duplicated.reduce((sum, id) => sum + counts.get(id)! - 1, 0);
        console.log(
          `multi-process: ${BULK} notifications accepted by 2 api processes; 3 workers, one SIGKILLed after ` +
            `${kill.atSink} messages reached the sink, holding ${kill.orphaned.length} leased messages ` +
            `(taken back by the others ${kill.takenBackMs} ms after the kill); ` +
            `all ${BULK} sent, none lost; DUPLICATES at the SMTP sink: ${duplicates}`,
        );

        // What the victim held when it died went back to the queue once its heartbeat stopped, and
        // a surviving worker claimed it (one more attempt) and sent it.
        const { rows: reclaimed } = await client.query<{ attempts: number; state: string }>(
          'SELECT attempts, state FROM notifications WHERE id = ANY($1::bigint[])',
          [kill.orphaned.map((row) => row.id)],
        );
        expect(reclaimed).toHaveLength(kill.orphaned.length);
        for (const row of reclaimed) {
          expect(row.state).toBe('sent');
          expect(row.attempts).toBeGreaterThanOrEqual(2);
        }
        // A crash resends at most what the dead worker had in flight: every duplicate is a message
        // it held when it died (sent, but its outcome never recorded), and arrived exactly twice.
        const orphaned = new Set(kill.orphaned.map((row) => row.requestId));
        expect(duplicated.filter((id) => !orphaned.has(id))).toEqual([]);
        expect(duplicated.filter((id) => counts.get(id)! > 2)).toEqual([]);
      },
    );

    it(`delivers ${CALM} notifications with no kill and no duplicate`, { timeout: 180_000 }, async () => {
      // Back to three workers.
      workers.push(await group.worker('worker-4', env));
      const from = sink.messages.length;
      const ids = accepted(
        await sendNotifications({ urls: apis, apiKey: bulk.api_key, count: CALM, concurrency: 50, agent }),
      );
      await waitAllSent(bulk.id, BULK + CALM, 120_000);
      const counts = deliveries(from);
      expect(ids.filter((id) => !counts.has(id))).toEqual([]);
      const duplicates = ids.reduce((sum, id) => sum + counts.get(id)!, 0) - CALM;
      console.log(
        `multi-process: ${CALM} notifications, no kill: DUPLICATES at the SMTP sink: ${duplicates}`,
      );
      if (duplicates > 0) for (const w of workers) console.log(w.name, w.problems.join('\n'));
      expect(duplicates).toBe(0);
      expect(counts.size).toBe(CALM);
    });
  });
});
