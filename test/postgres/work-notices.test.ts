import { mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/storage/postgres/open.js';
import type { ProjectChangesState } from '../../src/storage/postgres/project-changes.js';
import { WORK_CHANNEL } from '../../src/storage/postgres/work-notices.js';
import type { QueueTable } from '../../src/storage/queue.js';
import type { Storage } from '../../src/storage/storage.js';
import { createPostgresDatabase } from '../helpers/database.js';
import { heraldJson, ProcessGroup } from '../helpers/processes.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * On PostgreSQL a worker cannot see another process's commits for itself: a process that queued
 * work says so with a NOTIFY, and workers listening for it claim at once instead of at their poll.
 */
let database: { url: string; drop(): Promise<void> };

beforeAll(async () => {
  database = await createPostgresDatabase();
});
afterAll(async () => {
  await database?.drop();
});

describe('notices of queued work', () => {
  let announcer: Storage;
  let worker: Storage;
  let watcher: pg.Client;
  const heard: QueueTable[] = [];
  const seen: string[] = [];
  const states: ProjectChangesState[] = [];

  beforeAll(async () => {
    announcer = openPostgres({ url: database.url });
    await announcer.migrate();
    worker = openPostgres({ url: database.url, watchWork: true, onProjectChanges: (s) => states.push(s) });
    worker.onWorkElsewhere!((table) => heard.push(table));
    // Every notice on the channel, whoever sent it.
    watcher = new pg.Client({ connectionString: database.url });
    await watcher.connect();
    watcher.on('notification', ({ payload }) => seen.push(payload ?? ''));
    await watcher.query(`LISTEN ${WORK_CHANNEL}`);
    await waitUntil(() => (states.at(-1)?.listening ? true : undefined), { what: 'the listener' });
  });
  afterAll(async () => {
    await watcher?.end();
    await announcer?.close();
    await worker?.close();
  });

  it('wakes both queues when it starts listening: what was announced before was lost', () => {
    expect(new Set(heard)).toEqual(new Set(['notifications', 'webhook_deliveries']));
  });

  it("passes on another process's notice, and not its own", async () => {
    heard.length = 0;
    seen.length = 0;
    worker.announceWork!('notifications');
    await waitUntil(() => (seen.length === 1 ? true : undefined), { what: "the worker's own notice" });
    // Sent after the worker's own notice committed: the listener receives them in that order.
    announcer.announceWork!('webhook_deliveries');
    await waitUntil(() => (heard.length > 0 ? true : undefined), { what: "the other process's notice" });
    expect(heard).toEqual(['webhook_deliveries']);
  });

  it('sends a burst of announcements as at most two notices per queue', async () => {
    heard.length = 0;
    seen.length = 0;
    for (let i = 0; i < 50; i++)
      announcer.announceWork!(i % 2 === 0 ? 'notifications' : 'webhook_deliveries');
    await waitUntil(() => (heard.includes('webhook_deliveries') ? true : undefined), { what: 'the burst' });
    // The first goes at once; the other 49 wait for it and go together.
    await announcer.close();
    expect(seen.length).toBeLessThanOrEqual(3);
    expect(new Set(heard)).toEqual(new Set(['notifications', 'webhook_deliveries']));
  });
});

describe('an api process and a worker process polling once a minute', () => {
  const group = new ProcessGroup();
  let sink: SmtpSink;
  let dataDir: string;
  let env: Record<string, string>;
  const calls: string[] = [];
  const receiver = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      calls.push(body);
      response.writeHead(204).end();
    });
  });

  beforeAll(async () => {
    sink = await new SmtpSink().start();
    dataDir = mkdtempSync(path.join(tmpdir(), 'herald-notices-'));
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    env = {
      HERALD_DATABASE_URL: database.url,
      HERALD_DATA_DIR: dataDir,
      HERALD_SECRET_KEY: 'n'.repeat(64),
      HERALD_DEFAULT_QUOTA: 'unlimited',
      HERALD_SMTP_URL: sink.url,
      // Far beyond the waits below: only a notice can start the worker in time.
      HERALD_DELIVERY_POLL_MS: '60000',
    };
  });
  afterAll(async () => {
    await group.killAll();
    receiver.closeAllConnections();
    receiver.close();
    await sink?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("delivers each send and calls each cancel's webhook at once", { timeout: 120_000 }, async () => {
    const { api_key: apiKey } = await heraldJson<{ api_key: string }>(
      ['project', 'create', '--name', 'notices', '--from-email', 'noreply@notices.example'],
      env,
    );
    await heraldJson(
      [
        'template',
        'create',
        '--project',
        'notices',
        '--name',
        'welcome',
        '--subject',
        'Hi',
        '--text',
        'Hello',
      ],
      env,
    );
    const { port } = receiver.address() as AddressInfo;
    await heraldJson(
      [
        'webhook',
        'create',
        '--project',
        'notices',
        '--events',
        'notification.failed',
        '--url',
        `http://127.0.0.1:${port}/hooks`,
      ],
      env,
    );
    const { url } = await group.http('api', 'api', env);
    await group.worker('worker', env);
    const post = (body: Record<string, unknown>) =>
      fetch(`${url}/api/v1/notifications`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ template: 'welcome', ...body }),
      });

    // One after another: after each, the worker has nothing left and sleeps until its poll.
    for (const to of ['first@example.org', 'second@example.org', 'third@example.org']) {
      expect((await post({ to })).status).toBe(202);
      await waitUntil(() => (sink.messages.some((m) => m.envelopeTo.includes(to)) ? true : undefined), {
        what: `the message to ${to} at the relay`,
      });
    }

    const scheduled = await post({
      to: 'later@example.org',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(scheduled.status).toBe(202);
    const { request_id: requestId } = (await scheduled.json()) as { request_id: string };
    const canceled = await fetch(`${url}/api/v1/notifications/${requestId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(canceled.status).toBe(200);
    const [call] = await waitUntil(() => (calls.length > 0 ? calls : undefined), {
      what: "the cancel's webhook call",
    });
    expect(JSON.parse(call!)).toMatchObject({
      type: 'notification.failed',
      data: { request_id: requestId, error_message: 'Canceled' },
    });
  });
});
