import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../helpers/database.js';
import { deadRelay, type DeadRelay } from '../helpers/dead-relays.js';
import {
  heraldJson,
  ProcessGroup,
  requestIdOf,
  sendNotifications,
  type HeraldProcess,
} from '../helpers/processes.js';
import { waitUntil } from '../helpers/wait.js';
import { SmtpMailer } from '../../src/mail/smtp.js';

/**
 * product.md §10 scaled out on PostgreSQL with real processes: three `worker` processes share a
 * relay that accepts connections and never speaks. They agree that it is down (what each learns is
 * in the database), so none goes on connecting per message because it did not see the others'
 * failures; and workers started afresh remember it: their mail is not tried, only probed for.
 */

const WORKERS = 3;
const FIRST = 60;
const SECOND = 30;
const TIMEOUT_MS = 1500;
/** How often a worker reads what the others learned of a relay. */
const REFRESH_MS = 1000;

let database: { url: string; drop(): Promise<void> };
let dataDir: string;
let env: Record<string, string>;
let client: pg.Client;
let relay: DeadRelay;
const group = new ProcessGroup();
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
// Only to make the silent relay; nothing is sent through it.
const unused = new SmtpMailer({ timeoutMs: 1000 });

beforeAll(async () => {
  database = await createPostgresDatabase();
  dataDir = mkdtempSync(path.join(tmpdir(), 'herald-relay-down-'));
  relay = await deadRelay('silent', unused);
  env = {
    HERALD_DATABASE_URL: database.url,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: 'r'.repeat(64),
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_DELIVERY_POLL_MS: '100',
    HERALD_SMTP_URL: `smtp://127.0.0.1:${relay.port}?security=none`,
    HERALD_SMTP_TIMEOUT_MS: String(TIMEOUT_MS),
    HERALD_DELIVERY_MAX_ATTEMPTS: '2',
    HERALD_DELIVERY_RETRY_BASE_MS: '2000',
  };
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});

afterAll(async () => {
  await group.killAll();
  agent.destroy();
  unused.close();
  await client?.end();
  await relay?.close();
  await database?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await client.query<{ n: string }>(sql, params);
  return Number(rows[0]!.n);
}

async function relayRow(): Promise<{ down_since: string | null; probes: number }> {
  const { rows } = await client.query<{ down_since: string | null; probes: number }>(
    'select down_since, probes from relay_health where relay = $1',
    [`127.0.0.1:${relay.port}`],
  );
  return rows[0] ?? { down_since: null, probes: 0 };
}

async function allFinished(ids: readonly string[]): Promise<void> {
  await waitUntil(
    async () =>
      (await count(
        `select count(*) as n from notifications where request_id = any($1) and state <> 'failed'`,
        [ids],
      )) === 0
        ? true
        : undefined,
    { timeoutMs: 120_000, intervalMs: 200, what: 'every message to fail' },
  );
}

describe('three worker processes and a relay that is down', () => {
  it('agree on it, and workers started afresh remember it', { timeout: 300_000 }, async () => {
    await heraldJson(['migrate'], env);
    const project = await heraldJson<{ api_key: string }>(
      [
        'project',
        'create',
        '--name',
        'relays',
        '--quota',
        'unlimited',
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
        'relays',
        '--name',
        'welcome',
        '--subject',
        'Hi',
        '--text',
        'Hello.',
      ],
      env,
    );
    const api = await group.http('api', 'api', env);
    const send = async (n: number) =>
      (
        await sendNotifications({ urls: [api.url], apiKey: project.api_key, count: n, concurrency: 8, agent })
      ).map(requestIdOf);

    const first = await send(FIRST);
    let workers: HeraldProcess[] = await Promise.all(
      Array.from({ length: WORKERS }, (_, i) => group.worker(`worker-${i + 1}`, env)),
    );
    await allFinished(first);
    const down = await relayRow();
    expect(down.down_since).not.toBeNull();
    const downSince = Number(down.down_since);
    const before = relay.connections.length;
    // Each worker reads what the others learned every second (src/worker/relay-health.ts), and a
    // lane it freed in that second may still have opened one connection per transaction that
    // timed out: after a refresh and a deadline, every worker knows.
    const everyoneKnows = downSince + REFRESH_MS + TIMEOUT_MS;
    const afterDown = relay.connections.filter((at) => at >= downSince).length;
    const afterKnown = relay.connections.filter((at) => at >= everyoneKnows).length;
    console.info(
      `${WORKERS} workers, ${FIRST} messages: ${before} connections in all, ${afterDown} after the relay ` +
        `was judged down, ${afterKnown} once every worker knew (${down.probes} probes failed)`,
    );
    // Two attempts each would be 120 connections; each worker finds the relay down on its own
    // (at most 5 + 2 + 1 transactions) or from the others, whichever is first.
    expect(before).toBeLessThanOrEqual(WORKERS * 8 + down.probes + 1);
    // Once every worker knows, only probes, one at a time across all workers (one may be in
    // flight, not yet counted as failed).
    expect(afterKnown).toBeLessThanOrEqual(down.probes + 1);
    expect(
      await count(
        `select count(*) as n from notifications where request_id = any($1) and error_message like 'Relay down: %'`,
        [first],
      ),
    ).toBeGreaterThanOrEqual(FIRST - WORKERS * 8);

    // Every worker gone, new ones started: the relay is still down, and they know it.
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map((worker) => worker.exited));
    const second = await send(SECOND);
    const probesBefore = (await relayRow()).probes;
    const connectionsBefore = relay.connections.length;
    workers = await Promise.all(
      Array.from({ length: WORKERS }, (_, i) => group.worker(`again-${i + 1}`, env)),
    );
    await allFinished(second);
    const probes = (await relayRow()).probes - probesBefore;
    const connections = relay.connections.length - connectionsBefore;
    console.info(
      `restarted workers, ${SECOND} messages: ${connections} connections (${probes} probes failed)`,
    );
    expect(connections).toBeLessThanOrEqual(probes + 1);
    expect(
      await count(
        `select count(*) as n from notifications where request_id = any($1) and error_message like 'Relay down: %'`,
        [second],
      ),
    ).toBe(SECOND);
  });
});
