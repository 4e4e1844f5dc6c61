import { mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openPostgres } from '../../src/storage/postgres/open.js';
import type { ProjectChangesState } from '../../src/storage/postgres/project-changes.js';
import {
  newNoticeToken,
  WORK_CHANNEL,
  WorkNotices,
  type WorkNoticesState,
} from '../../src/storage/postgres/work-notices.js';
import type { QueueTable } from '../../src/storage/queue.js';
import type { Database } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { createPostgresDatabase } from '../helpers/database.js';
import {
  cliProjectWithTemplate,
  firstCall,
  heraldJson,
  ProcessGroup,
  scheduleAndCancel,
  WebhookReceiver,
} from '../helpers/processes.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
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
    worker = openPostgres({
      url: database.url,
      watchWork: true,
      onProjectChanges: (s) => states.push(s),
      // A check slowed past its interval on a busy machine would reconnect, and wake both queues.
      projectChangesCheckMs: 5_000,
    });
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

  /** Every notice sent before this has reached the watcher: they come before a query's answer. */
  async function allSeen(): Promise<string[]> {
    await watcher.query('SELECT 1');
    return seen;
  }

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

  it("takes notices with the token it was given for its own, as role all's child does its parent's", async () => {
    const token = newNoticeToken();
    const childStates: ProjectChangesState[] = [];
    const childHeard: QueueTable[] = [];
    const child = openPostgres({
      url: database.url,
      watchWork: true,
      noticeToken: token,
      onProjectChanges: (s) => childStates.push(s),
      projectChangesCheckMs: 5_000,
    });
    const parent = openPostgres({ url: database.url, noticeToken: token });
    try {
      child.onWorkElsewhere!((table) => childHeard.push(table));
      await waitUntil(() => (childStates.at(-1)?.listening ? true : undefined), {
        what: "the child's listener",
      });
      childHeard.length = 0;
      parent.announceWork!('notifications');
      // close() waits for the parent's notice: the other process's comes after it.
      await parent.close();
      announcer.announceWork!('webhook_deliveries');
      await waitUntil(() => (childHeard.length > 0 ? true : undefined), {
        what: "the other process's notice",
      });
      expect(childHeard).toEqual(['webhook_deliveries']);
    } finally {
      await child.close();
    }
  });

  it('sends a burst of announcements as one notice, then one per queue', async () => {
    const burst = openPostgres({ url: database.url });
    heard.length = 0;
    seen.length = 0;
    for (let i = 0; i < 50; i++) burst.announceWork!(i % 2 === 0 ? 'notifications' : 'webhook_deliveries');
    // The first goes at once; the other 49 wait for it and go together. close() waits for them.
    await burst.close();
    const [first, ...rest] = (await allSeen()).map((payload) => payload.split(' ')[0]);
    expect(first).toBe('notifications');
    expect(rest.sort()).toEqual(['notifications', 'webhook_deliveries']);
  });

  it('starts its notices at least 5 ms apart, however soon work is announced again', async () => {
    const busy = openPostgres({ url: database.url });
    seen.length = 0;
    const started = performance.now();
    // Each announcement a moment after the last notice arrived, when its send has finished.
    for (let i = 0; i < 10; i++) {
      const arrived = once(watcher, 'notification');
      busy.announceWork!('notifications');
      await arrived;
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    }
    const elapsed = performance.now() - started;
    await busy.close();
    expect(seen).toHaveLength(10);
    // Ten notices whose starts are at least 5 ms apart span at least 45 ms; a slower machine
    // only makes this longer.
    expect(elapsed).toBeGreaterThanOrEqual(45);
  });

  it('listens for work without the trigger that announces changes to projects', async () => {
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    const lone: QueueTable[] = [];
    const loneStates: ProjectChangesState[] = [];
    let alone: Storage | undefined;
    try {
      await admin.query('ALTER TABLE projects DISABLE TRIGGER projects_changed');
      alone = openPostgres({
        url: database.url,
        watchWork: true,
        onProjectChanges: (s) => loneStates.push(s),
      });
      alone.onWorkElsewhere!((table) => lone.push(table));
      await waitUntil(() => (loneStates.at(-1)?.listening ? true : undefined), { what: 'the work listener' });
      lone.length = 0;
      announcer.announceWork!('notifications');
      await waitUntil(() => (lone.length > 0 ? true : undefined), { what: 'the notice' });
      expect(lone).toEqual(['notifications']);
      expect(loneStates.every((state) => state.listening)).toBe(true);
    } finally {
      await alone?.close();
      await admin.query('ALTER TABLE projects ENABLE TRIGGER projects_changed');
      await admin.end();
    }
  });
});

describe('notices that cannot be sent', () => {
  it('are reported when they stop going out and when they go out again, once each', async () => {
    const direct = new URL(database.url);
    const proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
    await proxy.start();
    const pool = new pg.Pool({ connectionString: proxy.via(database.url), connectionTimeoutMillis: 5_000 });
    // A cut fails the query and, as with Herald's own pool, emits 'error' on its client and the pool.
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}));
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    const states: WorkNoticesState[] = [];
    // A listener that throws changes nothing: the same reports, and no rejection nobody handles.
    const complaints = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const notices = new WorkNotices(db, (state) => {
      states.push(state);
      throw new Error('the listener failed');
    });
    // close() waits for the notice being sent; the next announcement starts another.
    const notice = async (table: QueueTable) => {
      notices.announce(table);
      await notices.close();
    };
    try {
      await notice('notifications');
      expect(states).toEqual([]);

      await proxy.cut();
      await notice('notifications');
      await notice('webhook_deliveries');
      expect(states).toHaveLength(1);
      expect(states[0]).toMatchObject({ sending: false });
      expect((states[0] as { error: Error }).error).toBeInstanceOf(Error);

      await proxy.start();
      await notice('notifications');
      await notice('notifications');
      expect(states.map((state) => state.sending)).toEqual([false, true]);
      expect(complaints).toHaveBeenCalledTimes(2);
    } finally {
      complaints.mockRestore();
      await db.destroy();
      await proxy.cut();
    }
  });
});

describe('an api process and a worker process polling once a minute', () => {
  const group = new ProcessGroup();
  let sink: SmtpSink;
  let dataDir: string;
  let env: Record<string, string>;
  const receiver = new WebhookReceiver();
  let hooks: string;

  beforeAll(async () => {
    sink = await new SmtpSink().start();
    dataDir = mkdtempSync(path.join(tmpdir(), 'herald-notices-'));
    hooks = await receiver.start();
    env = {
      HERALD_DATABASE_URL: database.url,
      HERALD_DATA_DIR: dataDir,
      HERALD_SECRET_KEY: 'n'.repeat(64),
      HERALD_DEFAULT_QUOTA: 'unlimited',
      HERALD_SMTP_URL: sink.url,
      // Far beyond the waits below: only a notice can start the worker in time.
      HERALD_DELIVERY_POLL_MS: '60000',
      // One transaction at a time to the relay: a message sent while one is held waits, claimed.
      HERALD_SMTP_MAX_CONNECTIONS: '1',
    };
  });
  afterAll(async () => {
    await group.killAll();
    receiver.close();
    await sink?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("delivers each send and calls each cancel's webhook at once", { timeout: 120_000 }, async () => {
    const apiKey = await cliProjectWithTemplate(env, 'notices');
    await heraldJson(
      ['webhook', 'create', '--project', 'notices', '--events', 'notification.failed', '--url', hooks],
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

    const requestId = await scheduleAndCancel(url, apiKey);
    expect(await firstCall(receiver, "the cancel's webhook call")).toMatchObject({
      type: 'notification.failed',
      data: { request_id: requestId, error_message: 'Canceled' },
    });
  });

  it('cancels mail the worker process claimed but has not begun to send', { timeout: 120_000 }, async () => {
    const apiKey = await cliProjectWithTemplate(env, 'claimed');
    const { url } = await group.http('api-claimed', 'api', env);
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url }) }),
    });
    const stateOf = async (requestId: string) =>
      (
        await db
          .selectFrom('notifications')
          .select('state')
          .where('request_id', '=', requestId)
          .executeTakeFirstOrThrow()
      ).state;
    const send = async (to: string) => {
      const response = await fetch(`${url}/api/v1/notifications`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ template: 'welcome', to }),
      });
      expect(response.status).toBe(202);
      return ((await response.json()) as { request_id: string }).request_id;
    };
    const cancel = (requestId: string) =>
      fetch(`${url}/api/v1/notifications/${requestId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${apiKey}` },
      });
    sink.hold();
    try {
      const first = await send('held@example.org');
      await waitUntil(() => (sink.waiting === 1 ? true : undefined), { what: 'the first transaction' });
      const second = await send('waiting@example.org');
      await waitUntil(async () => ((await stateOf(second)) === 'sending' ? true : undefined), {
        what: 'the worker process to claim the second',
      });
      // The worker process hears of the cancel only by a notice: its poll is a minute away.
      const canceled = await cancel(second);
      expect(canceled.status).toBe(200);
      expect(await canceled.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
      expect((await cancel(first)).status).toBe(409);
      sink.release();
      await waitUntil(async () => ((await stateOf(first)) === 'sent' ? true : undefined), {
        what: 'the first to be sent',
      });
      expect(sink.messages.filter((m) => m.envelopeTo.includes('held@example.org'))).toHaveLength(1);
      expect(sink.messages.filter((m) => m.envelopeTo.includes('waiting@example.org'))).toHaveLength(0);
    } finally {
      sink.release();
      await db.destroy();
    }
  });
});
