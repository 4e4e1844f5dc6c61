import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices } from '../../src/compose.js';
import { createLogger } from '../../src/logger.js';
import { createPostgresDatabase } from '../helpers/database.js';
import {
  httpRequest,
  ProcessGroup,
  requestIdOf,
  sendNotifications,
  type HeraldProcess,
  type HttpReply,
} from '../helpers/processes.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A database outage, as Herald sees it: the shared PostgreSQL server stays up for the other tests,
 * and Herald reaches it through a TCP proxy that this test cuts (every connection destroyed, the
 * port closed) and restores. While the database is unreachable a send answers 500 `Failed to
 * queue notification`, never 202, and /readyz answers 503; once it is back, everything accepted
 * before and after the outage is delivered.
 */

const QUEUE_FAILED = { error: 'Failed to queue notification' };

let database: { url: string; drop(): Promise<void> };
let dataDir: string;
let proxy: TcpProxy;
let sink: SmtpSink;
let client: pg.Client;
let apiKey: string;
let projectId: number;
let herald: HeraldProcess;
let url: string;
const group = new ProcessGroup();

beforeAll(async () => {
  database = await createPostgresDatabase();
  dataDir = mkdtempSync(path.join(tmpdir(), 'herald-outage-'));
  sink = await new SmtpSink().start();
  const direct = new URL(database.url);
  proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
  await proxy.start();

  const env = {
    HERALD_DATABASE_URL: proxy.via(database.url),
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: 'o'.repeat(64),
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_LEASE_MS: '3000',
    HERALD_DELIVERY_RETRY_BASE_MS: '200',
    HERALD_DELIVERY_POLL_MS: '100',
  };
  // Schema, project and template straight on the database, with Herald's own services.
  const config = loadConfig({ ...env, HERALD_DATABASE_URL: database.url, HERALD_LOG_LEVEL: 'silent' });
  const services = await openServices(config, createLogger('silent'));
  try {
    const created = await services.projects.create({
      name: 'outage',
      fromEmail: 'noreply@herald.example',
      quotaLimit: null,
    });
    apiKey = created.apiKey;
    projectId = created.project.id;
    await services.templates.create(projectId, {
      name: 'welcome',
      subject: 'Hi {{user_name}}',
      text: 'Hello.',
    });
  } finally {
    await closeServices(services);
  }
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  ({ proc: herald, url } = await group.http('herald', 'all', env));
}, 120_000);

afterAll(async () => {
  if (herald !== undefined && !herald.running) console.error(`herald exited:\n${herald.output()}`);
  await group.killAll();
  await proxy?.cut();
  await client?.end();
  await sink?.stop();
  await database?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function send(count: number, concurrency = 10): Promise<HttpReply[]> {
  return sendNotifications({ urls: [url], apiKey, count, concurrency });
}

async function readyz(): Promise<HttpReply> {
  return httpRequest(`${url}/readyz`);
}

async function storedStates(): Promise<Map<string, string>> {
  const { rows } = await client.query<{ request_id: string; state: string }>(
    'SELECT request_id, state FROM notifications WHERE project_id = $1',
    [projectId],
  );
  return new Map(rows.map((row) => [row.request_id, row.state]));
}

async function waitDelivered(ids: readonly string[]): Promise<void> {
  let seen = '';
  await waitUntil(
    async () => {
      const states = await storedStates();
      const c: Record<string, number> = {};
      for (const id of ids) c[states.get(id) ?? 'missing'] = (c[states.get(id) ?? 'missing'] ?? 0) + 1;
      seen = JSON.stringify(c);
      return ids.every((id) => states.get(id) === 'sent') ? true : undefined;
    },
    {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: () => `${ids.length} sent: ${seen}\n${herald.output().slice(-8000)}`,
    },
  );
}

function deliveries(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of sink.messages) {
    const id = String(message.parsed.headers.get('x-herald-request-id'));
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

describe('a PostgreSQL outage (herald serve --role all through a TCP proxy)', () => {
  const acceptedIds: string[] = [];

  it('accepts and delivers while the database is reachable', { timeout: 60_000 }, async () => {
    expect((await readyz()).status).toBe(200);
    const replies = await send(20);
    expect(replies.map((reply) => reply.status)).toEqual(new Array(20).fill(202));
    acceptedIds.push(...replies.map(requestIdOf));
    // Delivered and recorded before the cut, so the cut interrupts no delivery.
    await waitDelivered(acceptedIds);
  });

  it(
    'answers 500 `Failed to queue notification` and /readyz 503 while it is down',
    { timeout: 60_000 },
    async () => {
      await proxy.cut();
      const replies = await send(30);
      for (const reply of replies) {
        expect(reply.status).toBe(500);
        expect(JSON.parse(reply.body)).toEqual(QUEUE_FAILED);
      }
      const ready = await readyz();
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body)).toEqual({ status: 'unavailable', error: 'database unreachable' });
      // Liveness does not depend on the database: the process is fine and must not be restarted.
      expect((await httpRequest(`${url}/healthz`)).status).toBe(200);
      expect(herald.running).toBe(true);
      // Nothing was stored for the refused requests.
      expect((await storedStates()).size).toBe(acceptedIds.length);
    },
  );

  it(
    'accepts again once the database is back, and delivers everything accepted once',
    { timeout: 90_000 },
    async () => {
      await proxy.start();
      await waitUntil(async () => ((await readyz()).status === 200 ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: '/readyz to answer 200 again',
      });
      const replies = await send(20);
      expect(replies.map((reply) => reply.status)).toEqual(new Array(20).fill(202));
      acceptedIds.push(...replies.map(requestIdOf));
      await waitDelivered(acceptedIds);

      const states = await storedStates();
      expect(states.size).toBe(40);
      const counts = deliveries();
      expect(acceptedIds.filter((id) => counts.get(id) !== 1)).toEqual([]);
      expect(sink.messages).toHaveLength(40);
    },
  );

  it(
    'never answers 202 for a send that was not stored when the cut hits mid-traffic',
    { timeout: 120_000 },
    async () => {
      const total = 300;
      let started = 0;
      const sending = sendNotifications({
        urls: [url],
        apiKey,
        count: total,
        concurrency: 20,
        body: (i) => {
          started = i;
          return { template: 'welcome', to: `user${i}@example.org`, data: { user_name: `U${i}` } };
        },
      });
      await waitUntil(() => (started >= 60 ? true : undefined), { timeoutMs: 60_000, what: '60 sends' });
      await proxy.cut();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await proxy.start();
      const replies = await sending;

      const accepted: string[] = [];
      let refused = 0;
      for (const reply of replies) {
        if (reply.status === 202) accepted.push(requestIdOf(reply));
        else {
          expect(reply.status).toBe(500);
          expect(JSON.parse(reply.body)).toEqual(QUEUE_FAILED);
          refused++;
        }
      }
      // Every 202 is a stored notification, delivered exactly once when the database is back: an outcome
      // or a claim whose answer the cut lost is neither sent again nor left behind.
      const states = await storedStates();
      expect(accepted.filter((id) => !states.has(id))).toEqual([]);
      await waitDelivered(accepted);
      const counts = deliveries();
      expect(accepted.filter((id) => counts.get(id) !== 1)).toEqual([]);
      console.log(
        `db-outage: cut mid-traffic: ${accepted.length} × 202 (all stored and delivered once), ${refused} × 500`,
      );
    },
  );
});
