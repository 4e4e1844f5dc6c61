import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../helpers/database.js';
import {
  heraldJson,
  ProcessGroup,
  requestIdOf,
  sendNotifications,
  type HeraldProcess,
} from '../helpers/processes.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Webhook delivery scaled out on PostgreSQL with real processes: one `api` and three `worker`
 * processes share one database and one endpoint. Every worker runs webhook lanes that claim from
 * the same deliveries table (SKIP LOCKED), so with no crash each event must reach the receiver
 * exactly once: none lost, none delivered twice by two workers.
 */

const COUNT = 300;
const WORKERS = 3;
/** HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: calls one worker process makes to one endpoint at once. */
const PER_ENDPOINT = 4;

let database: { url: string; drop(): Promise<void> };
let dataDir: string;
let env: Record<string, string>;
let client: pg.Client;
let receiver: http.Server;
let verifier: Webhook | null = null;
const group = new ProcessGroup();
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

interface Arrival {
  readonly id: string;
  readonly type: string;
  readonly requestId: string | undefined;
  readonly verified: boolean;
}
const arrivals: Arrival[] = [];
/** While true, calls are held unanswered: the test sees how many are in flight at once. */
let holding = true;
const held: http.ServerResponse[] = [];

beforeAll(async () => {
  database = await createPostgresDatabase();
  dataDir = mkdtempSync(path.join(tmpdir(), 'herald-multi-hooks-'));
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let verified = true;
      try {
        verifier!.verify(raw, req.headers as Record<string, string>);
      } catch {
        verified = false;
      }
      const body = JSON.parse(raw) as { type: string; data: { request_id?: string } };
      arrivals.push({
        id: String(req.headers['webhook-id']),
        type: body.type,
        requestId: body.data.request_id,
        verified,
      });
      if (!verified) res.writeHead(400).end();
      else if (holding) held.push(res);
      else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  env = {
    HERALD_DATABASE_URL: database.url,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: 'w'.repeat(64),
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_DELIVERY_POLL_MS: '100',
    HERALD_WEBHOOK_RETRY_BASE_MS: '200',
    HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: String(PER_ENDPOINT),
    // Held calls must not time out while the test looks at them.
    HERALD_WEBHOOK_TIMEOUT_MS: '60000',
  };
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});

afterAll(async () => {
  await group.killAll();
  agent.destroy();
  await client?.end();
  receiver?.closeAllConnections();
  await new Promise((resolve) => receiver?.close(resolve));
  await database?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await client.query<{ n: string }>(sql, params);
  return Number(rows[0]!.n);
}

describe('webhooks from three worker processes on PostgreSQL', () => {
  it(`delivers each of ${COUNT} events exactly once`, { timeout: 180_000 }, async () => {
    await heraldJson(['migrate'], env);
    const project = await heraldJson<{ id: number; api_key: string }>(
      [
        'project',
        'create',
        '--name',
        'hooks',
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
        'hooks',
        '--name',
        'welcome',
        '--subject',
        'Hi {{user_name}}',
        '--text',
        'Hello {{user_name}}.',
      ],
      env,
    );
    const port = (receiver.address() as AddressInfo).port;
    const endpoint = await heraldJson<{ id: number; secret: string }>(
      ['webhook', 'create', '--project', 'hooks', '--url', `http://127.0.0.1:${port}/hooks`],
      env,
    );
    expect(endpoint.secret).toMatch(/^whsec_/);
    verifier = new Webhook(endpoint.secret);

    // Capture mode: no relay anywhere, so each message is `sent` as soon as a worker takes it.
    const started = await Promise.all([
      group.http('api', 'api', env),
      group.worker('worker-1', env),
      group.worker('worker-2', env),
      group.worker('worker-3', env),
    ]);
    const api = started[0].url;
    const workers: HeraldProcess[] = [started[1], started[2], started[3]];

    const replies = await sendNotifications({
      urls: [api],
      apiKey: project.api_key,
      count: COUNT,
      concurrency: 20,
      agent,
    });
    expect(replies.map((reply) => reply.status)).toEqual(Array.from({ length: COUNT }, () => 202));
    const requestIds = replies.map(requestIdOf);

    // Every worker's webhook lanes call the endpoint at once, each within its per-endpoint bound:
    // with the receiver holding every call, exactly WORKERS × PER_ENDPOINT are in flight.
    await waitUntil(() => (held.length >= WORKERS * PER_ENDPOINT ? true : undefined), {
      timeoutMs: 60_000,
      what: `${WORKERS * PER_ENDPOINT} webhook calls in flight at once`,
    });
    expect(held).toHaveLength(WORKERS * PER_ENDPOINT);
    expect(new Set(arrivals.map((a) => a.id)).size).toBe(WORKERS * PER_ENDPOINT);
    holding = false;
    for (const res of held.splice(0)) res.writeHead(204).end();

    await waitUntil(
      async () =>
        (await count("SELECT count(*) AS n FROM notifications WHERE project_id = $1 AND state = 'sent'", [
          project.id,
        ])) === COUNT
          ? true
          : undefined,
      { timeoutMs: 120_000, intervalMs: 200, what: `all ${COUNT} notifications to be sent` },
    );
    await waitUntil(
      () =>
        new Set(arrivals.filter((a) => a.type === 'notification.sent').map((a) => a.id)).size >= COUNT
          ? true
          : undefined,
      {
        timeoutMs: 120_000,
        intervalMs: 100,
        what: `${COUNT} distinct notification.sent events at the receiver`,
      },
    );
    await waitUntil(
      async () =>
        (await count(
          "SELECT count(*) AS n FROM webhook_deliveries WHERE project_id = $1 AND state <> 'succeeded'",
          [project.id],
        )) === 0
          ? true
          : undefined,
      { timeoutMs: 60_000, intervalMs: 100, what: 'every delivery to be recorded succeeded' },
    );
    // A graceful stop finishes every call in flight: a second call of an event, had one been made,
    // has arrived by the time the workers exit.
    for (const worker of workers) worker.kill('SIGTERM');
    expect(await Promise.all(workers.map((worker) => worker.exited))).toEqual([0, 0, 0]);

    const { rows: events } = await client.query<{ webhook_id: string; type: string; request_id: string }>(
      `SELECT e.webhook_id, e.type, n.request_id
         FROM webhook_events e JOIN notifications n ON n.id = e.notification_id
        WHERE e.project_id = $1`,
      [project.id],
    );
    expect(events).toHaveLength(COUNT);
    expect(events.every((e) => e.type === 'notification.sent')).toBe(true);
    expect(new Set(events.map((e) => e.request_id))).toEqual(new Set(requestIds));

    // Every event arrived, signed, exactly once, and nothing else arrived.
    const perId = new Map<string, number>();
    for (const arrival of arrivals) perId.set(arrival.id, (perId.get(arrival.id) ?? 0) + 1);
    const duplicated = [...perId].filter(([, n]) => n > 1);
    console.info(
      `multi-worker-webhooks: ${COUNT} events from ${WORKERS} workers, ${arrivals.length} calls received, ` +
        `DUPLICATES: ${duplicated.length}`,
    );
    expect(duplicated).toEqual([]);
    expect(arrivals.filter((a) => !a.verified)).toEqual([]);
    expect(new Set(perId.keys())).toEqual(new Set(events.map((e) => e.webhook_id)));
    expect(arrivals).toHaveLength(COUNT);
    const byRequest = new Map(events.map((e) => [e.webhook_id, e.request_id]));
    for (const arrival of arrivals) expect(arrival.requestId).toBe(byRequest.get(arrival.id));

    // One delivery per event, each claimed once and answered 204 at its first attempt.
    const { rows: deliveries } = await client.query<{
      state: string;
      attempts: number;
      last_status_code: number;
    }>('SELECT state, attempts, last_status_code FROM webhook_deliveries WHERE project_id = $1', [
      project.id,
    ]);
    expect(deliveries).toHaveLength(COUNT);
    expect(deliveries.filter((d) => d.state !== 'succeeded')).toEqual([]);
    expect(deliveries.filter((d) => d.attempts !== 1 || d.last_status_code !== 204)).toEqual([]);
    expect(
      await count(
        'SELECT count(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.project_id = $1',
        [project.id],
      ),
    ).toBe(COUNT);
  });
});
