import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ImapFlow } from 'imapflow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailboxTargets } from '../../src/bounces/imap-intake.js';
import { MOVE_HOLD_MS, ReportReceiver, type Received } from '../../src/bounces/receive.js';
import { ReportParser } from '../../src/bounces/report-parser.js';
import type { BounceReaders } from '../../src/bounces/readers.js';
import { createBounceReaders, createWorker, type Worker } from '../../src/roles.js';
import type { ImapIntakeConfig } from '../../src/config.js';
import { parseImapUrl } from '../../src/domain/imap-url.js';
import { createLogger } from '../../src/logger.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { loadBounceFixture, type BounceFixture } from '../fixtures/bounces/load.js';
import { Dovecot } from '../helpers/dovecot.js';
import { settledStatus, statusOf } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { skipSuite } from '../suites.js';

/**
 * The bounce mailbox (HERALD_BOUNCE_IMAP_URL, product.md §9) against a real IMAP server: Dovecot,
 * started by the test on a loopback port with users of its own (test/helpers/dovecot.ts). A
 * message goes out through the worker to a real relay with its Return-Path
 * `alerts+<token>@example.org`; its report is put in the mailbox, as the mailbox provider would
 * deliver it, and Herald reads it (IDLE, or polling where the server has no IDLE), applies it once,
 * and moves it: to Herald/Processed, or to Herald/Unrecognized when it is not a report, too large
 * or forged. Nothing is ever deleted, a report is applied once whatever happens to the message
 * (read again, read by two workers, left in the mailbox by a crash), and trouble with the server
 * (a wrong password, a mailbox that went away) is logged once and retried, never fatal.
 */

const ADDRESS = 'alerts@example.org';
const PASSWORD = 'mailbox-password';

let ctx: TestContext;
let sink: SmtpSink;
let worker: Worker;
let dovecot: Dovecot;
let noIdle: Dovecot;
let project: { projectId: number; apiKey: string };
const running: BounceReaders[] = [];
const clients: ImapFlow[] = [];
let users = 0;
/** Takes every webhook call: with an endpoint, the events are written (and can be counted). */
const receiver = http.createServer((_req, res) => res.writeHead(204).end());

interface Sent {
  readonly requestId: string;
  readonly id: number;
  readonly to: string;
  readonly messageId: string;
  readonly returnPath: string;
}

async function sendThroughRelay(): Promise<Sent> {
  users++;
  const to = `jane-${users}@example.org`;
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${project.apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jane' } },
  });
  const { request_id: requestId } = response.json<{ request_id: string }>();
  const body = await settledStatus(ctx.app, project.apiKey, requestId);
  expect(body.status).toBe('sent');
  const atRelay = await waitUntil(() =>
    sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId),
  );
  const { notification } = await ctx.services.notifications.detail(requestId);
  return {
    requestId,
    id: body.id,
    to,
    messageId: notification.message_id!,
    returnPath: atRelay.envelopeFrom,
  };
}

/** The report as the mailbox provider delivers it: with Delivered-To naming the address it came to. */
function delivered(name: BounceFixture, sent: Sent, to = sent.returnPath): Buffer {
  const report = loadBounceFixture(name, { tokenAddress: to, messageId: sent.messageId, recipient: sent.to });
  return Buffer.concat([Buffer.from(`Delivered-To: ${to}\r\n`), report]);
}

async function eventTypes(notificationId: number): Promise<string[]> {
  const rows = await ctx.services.storage.db
    .selectFrom('webhook_events')
    .select(['type', 'id'])
    .where('notification_id', '=', notificationId)
    .orderBy('id')
    .execute();
  return rows.map((row) => row.type);
}

/** A fresh mailbox user of the server, and a client of the test's own logged in as it. */
async function mailbox(server = dovecot): Promise<{ user: string; client: ImapFlow }> {
  users++;
  const user = `box${users}@example.org`;
  server.setUser(user, PASSWORD);
  const client = await server.client(user);
  clients.push(client);
  return { user, client };
}

interface Readers {
  readonly readers: BounceReaders;
  readonly logs: Record<string, unknown>[];
  readonly metrics: Metrics;
  readonly config: ImapIntakeConfig;
}

/**
 * Bounce readers of the mailbox at `url`, with their own log and metrics; `intake` stands in for
 * the services' (to hold an apply).
 */
async function startReaders(url: string, pollMs = 600_000, intake = ctx.services.bounces): Promise<Readers> {
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) });
  const metrics = new Metrics(() => Promise.resolve({ queued: 0, sending: 0, oldestDueAgeSeconds: 0 }));
  const config: ImapIntakeConfig = {
    ...ctx.config.bounces.imap!,
    ...parseImapUrl(url),
    pollMs,
  };
  const readers = await createBounceReaders(
    {
      ...ctx.services,
      bounces: intake,
      logger,
      metrics,
      config: { ...ctx.config, bounces: { ...ctx.config.bounces, imap: config } },
    },
    { imapBackoffMs: 100, imapMaxBackoffMs: 1_000 },
  );
  running.push(readers);
  await readers.start();
  return { readers, logs, metrics, config };
}

/** Reads `report` as another reader named `owner` would, and stops before the move. */
async function readElsewhere(report: Buffer, owner: string, now?: () => number): Promise<Received> {
  const parser = new ReportParser();
  try {
    const receiver = new ReportReceiver(ctx.services.storage.db, ctx.services.bounces, parser, owner, now);
    const targets = mailboxTargets(ctx.services.bounceKey, ctx.config.bounces.imap!.address);
    return await receiver.receive(report, targets);
  } finally {
    await parser.close();
  }
}

const messages = (logs: Record<string, unknown>[], text: string) =>
  logs.filter((line) => String(line.msg).includes(text));

async function counted(metrics: Metrics): Promise<Record<string, number>> {
  const { values } = await metrics.bounceImapMessages.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.outcome), v.value]));
}

/** The counts once they are these (a message is counted right after its move). */
async function countedAs(metrics: Metrics, expected: Record<string, number>): Promise<void> {
  const sorted = (counts: Record<string, number>) => JSON.stringify(Object.entries(counts).sort());
  await waitUntil(async () => (sorted(await counted(metrics)) === sorted(expected) ? true : undefined), {
    what: `the counts ${JSON.stringify(expected)}`,
  });
}

/** Waits until `folder` holds `count` messages, and `INBOX` (or `watched`) none. */
async function movedTo(client: ImapFlow, folder: string, count: number, watched = 'INBOX'): Promise<void> {
  await waitUntil(
    async () => {
      const [left, there] = [await Dovecot.uids(client, watched), await Dovecot.uids(client, folder)];
      return left.length === 0 && there.length === count ? true : undefined;
    },
    { what: `${count} message(s) moved from ${watched} to ${folder}` },
  );
}

/** Without Dovecot the file's tests are skipped, loudly and counted; in CI that fails instead. */
const unavailable = Dovecot.unavailable();
if (unavailable !== null && process.env.CI)
  throw new Error(`CI must run the IMAP bounce mailbox tests: ${unavailable}`);
const suite = unavailable === null ? describe : describe.skip;
if (unavailable !== null)
  it('runs against a real IMAP server', (context) => skipSuite(context, 'IMAP (Dovecot)', unavailable));

beforeAll(async () => {
  if (unavailable !== null) return;
  [dovecot, noIdle] = await Promise.all([Dovecot.start(), Dovecot.start({ idle: false })]);
  dovecot.setUser(ADDRESS, PASSWORD);
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_BOUNCE_IMAP_URL: dovecot.url(ADDRESS),
    HERALD_BOUNCE_MAX_BYTES: String(1024 * 1024),
    HERALD_DELIVERY_POLL_MS: '20',
    HERALD_SMTP_TIMEOUT_MS: '5000',
  });
  project = await seedProject(ctx.services, { fromEmail: 'orders@shop.example.com' });
  await ctx.services.smtpSettings.setFromUrl(project.projectId, sink.url);
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  await ctx.services.webhooks.create(project.projectId, {
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
  });
  worker = createWorker(ctx.services);
  worker.start();
}, 60_000);

afterAll(async () => {
  for (const readers of running.splice(0)) await readers.close();
  for (const client of clients) await client.logout().catch(() => {});
  await worker?.stop();
  await ctx?.close();
  await sink?.stop();
  await dovecot?.stop();
  await noIdle?.stop();
  await new Promise((resolve) => receiver.close(resolve));
});

suite('the Return-Path with a bounce mailbox', () => {
  it("is <local>+<token>@ the mailbox's domain, without HERALD_BOUNCE_DOMAIN", async () => {
    expect(ctx.config.bounces.domain).toBeNull();
    const sent = await sendThroughRelay();
    expect(sent.returnPath).toMatch(/^alerts\+[0-9a-z]+-[a-z2-7]{16}@example\.org$/);
  });
});

suite('reading the mailbox', () => {
  it('with IDLE: a hard bounce fails the message at once and the report moves to Herald/Processed', async () => {
    const { user, client } = await mailbox();
    // Polled only every ten minutes: only IDLE brings the report in within the wait.
    const { logs, metrics } = await startReaders(dovecot.url(user));
    await waitUntil(() => (messages(logs, 'IMAP IDLE').length > 0 ? true : undefined), { what: 'the watch' });
    expect((await metrics.bounceImapConnected.get()).values[0]!.value).toBe(1);
    const sent = await sendThroughRelay();
    await client.append('INBOX', delivered('postfix-dsn', sent));
    await movedTo(client, 'Herald/Processed', 1);
    expect(await statusOf(ctx.app, project.apiKey, sent.requestId)).toMatchObject({
      status: 'failed',
      bounce: { type: 'hard', category: 'user_unknown' },
    });
    expect(await eventTypes(sent.id)).toEqual(['notification.sent', 'notification.bounced']);
    await countedAs(metrics, { bounced: 1 });
  });

  it('a report that arrives while another is being read is read next, not at the next poll', async () => {
    const { user, client } = await mailbox();
    // The first apply waits until the second report is in the mailbox: the server announces it
    // with its answer to the move, not in IDLE.
    let entered: () => void;
    const applying = new Promise<void>((resolve) => (entered = resolve));
    let release: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held = Object.create(ctx.services.bounces) as typeof ctx.services.bounces;
    held.apply = async (...args) => {
      entered();
      await released;
      return ctx.services.bounces.apply(...args);
    };
    // Polled only every ten minutes, and IDLE renewed every four: the second report is read
    // within the wait only if the reader looks again at once.
    const { logs } = await startReaders(dovecot.url(user), 600_000, held);
    await waitUntil(() => (messages(logs, 'IMAP IDLE').length > 0 ? true : undefined), { what: 'the watch' });
    const [first, second] = [await sendThroughRelay(), await sendThroughRelay()];
    await client.append('INBOX', delivered('postfix-dsn', first));
    await applying;
    await client.append('INBOX', delivered('postfix-dsn', second));
    release!();
    await movedTo(client, 'Herald/Processed', 2);
    for (const sent of [first, second])
      expect((await statusOf(ctx.app, project.apiKey, sent.requestId)).status).toBe('failed');
  });

  it('a message the store refuses is logged once, read again, and set aside; the ones after it are read', async () => {
    const { user, client } = await mailbox();
    const [stuck, next] = [await sendThroughRelay(), await sendThroughRelay()];
    // The store refuses what the first report says (as PostgreSQL refuses a NUL), and answers otherwise.
    const refusing = Object.create(ctx.services.bounces) as typeof ctx.services.bounces;
    refusing.apply = (target, ...rest) =>
      target.kind === 'token' && target.id === stuck.id
        ? Promise.reject(new Error('invalid byte sequence for encoding "UTF8": 0x00'))
        : ctx.services.bounces.apply(target, ...rest);
    await client.append('INBOX', delivered('postfix-dsn', stuck));
    await client.append('INBOX', delivered('postfix-dsn', next));
    const { logs, metrics } = await startReaders(dovecot.url(user), 600_000, refusing);
    // Read again at the next looks (after 100 ms, then 200 ms here), then moved aside.
    await waitUntil(
      async () => ((await Dovecot.uids(client, 'Herald/Unrecognized')).length === 1 ? true : undefined),
      { what: 'the refused report to be set aside' },
    );
    expect(await Dovecot.uids(client, 'INBOX')).toEqual([]);
    expect(await Dovecot.uids(client, 'Herald/Processed')).toHaveLength(1);
    expect((await statusOf(ctx.app, project.apiKey, next.requestId)).status).toBe('failed');
    expect((await statusOf(ctx.app, project.apiKey, stuck.requestId)).status).toBe('sent');
    const refused = messages(logs, 'could not be read (invalid byte sequence');
    expect(refused.filter((line) => line.level === 50)).toHaveLength(1);
    expect(messages(logs, 'could not be read in 3 looks')).toHaveLength(1);
    // The session was never dropped for it.
    expect(messages(logs, 'watching')).toHaveLength(1);
    await countedAs(metrics, { bounced: 1, unreadable: 1 });
  });

  it('trouble with the store ends the look and backs off, never counted against the message', async () => {
    const { user, client } = await mailbox();
    const sent = await sendThroughRelay();
    // The store holds its lock past the wait (another process writing) for the first five tries.
    let refusals = 5;
    const locked = Object.create(ctx.services.bounces) as typeof ctx.services.bounces;
    locked.apply = (...args) =>
      refusals-- > 0
        ? Promise.reject(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }))
        : ctx.services.bounces.apply(...args);
    await client.append('INBOX', delivered('postfix-dsn', sent));
    const { logs, metrics } = await startReaders(dovecot.url(user), 600_000, locked);
    await movedTo(client, 'Herald/Processed', 1);
    expect((await statusOf(ctx.app, project.apiKey, sent.requestId)).status).toBe('failed');
    const failures = messages(logs, 'storing reports failed');
    expect(failures.filter((line) => line.level === 50)).toHaveLength(1);
    expect(failures.length).toBeGreaterThanOrEqual(5);
    expect(messages(logs, 'storing reports works again')).toHaveLength(1);
    // On the same connection throughout.
    expect(messages(logs, 'watching')).toHaveLength(1);
    await countedAs(metrics, { bounced: 1 });
  });

  it('without IDLE in the CAPABILITY it polls the mailbox', async () => {
    const { user, client } = await mailbox(noIdle);
    const { logs } = await startReaders(noIdle.url(user), 200);
    await waitUntil(() => (messages(logs, 'polling every 0.2 s (no IDLE)').length > 0 ? true : undefined));
    const sent = await sendThroughRelay();
    await client.append('INBOX', delivered('arf-complaint', sent));
    await movedTo(client, 'Herald/Processed', 1);
    expect(await eventTypes(sent.id)).toEqual(['notification.sent', 'notification.complained']);
  });

  it('mail that is not a report, or names a forged token, goes to Herald/Unrecognized and changes nothing', async () => {
    const { user, client } = await mailbox();
    const { metrics } = await startReaders(dovecot.url(user));
    const sent = await sendThroughRelay();
    const forged = sent.returnPath.replace(/[a-z2-7](?=@)/, (c) => (c === 'a' ? 'b' : 'a'));
    await client.append('INBOX', delivered('not-a-report', sent));
    await client.append('INBOX', delivered('postfix-dsn', sent, forged));
    await movedTo(client, 'Herald/Unrecognized', 2);
    expect(await eventTypes(sent.id)).toEqual(['notification.sent']);
    await countedAs(metrics, { unrecognized: 1, forged: 1 });
  });
});

suite('at most once', () => {
  it('a report put back in the mailbox after it was moved is moved again, not applied again', async () => {
    const { user, client } = await mailbox();
    const { metrics } = await startReaders(dovecot.url(user));
    const sent = await sendThroughRelay();
    const report = delivered('dsn-delayed', sent);
    await client.append('INBOX', report);
    await movedTo(client, 'Herald/Processed', 1);
    await client.append('INBOX', report);
    await movedTo(client, 'Herald/Processed', 2);
    // A soft bounce writes an event each time it applies: one event, so it applied once.
    expect(await eventTypes(sent.id)).toEqual(['notification.sent', 'notification.bounced']);
    await countedAs(metrics, { soft_bounce: 1, duplicate: 1 });
  });

  it('two workers watching the same mailbox apply each report once', async () => {
    const { user, client } = await mailbox();
    const [a, b] = await Promise.all([startReaders(dovecot.url(user)), startReaders(dovecot.url(user))]);
    const sent = await Promise.all(Array.from({ length: 6 }, () => sendThroughRelay()));
    for (const one of sent) await client.append('INBOX', delivered('dsn-delayed', one));
    await movedTo(client, 'Herald/Processed', 6);
    for (const one of sent)
      expect(await eventTypes(one.id)).toEqual(['notification.sent', 'notification.bounced']);
    // Each applied by one of them; the other, if it read it too, found it read or held.
    await waitUntil(async () => {
      const [ca, cb] = [await counted(a.metrics), await counted(b.metrics)];
      return (ca.soft_bounce ?? 0) + (cb.soft_bounce ?? 0) === 6 ? true : undefined;
    });
  });

  it('after a crash between the apply and the move, the next start moves the report without applying it', async () => {
    const { user, client } = await mailbox();
    const sent = await sendThroughRelay();
    const report = delivered('postfix-dsn', sent);
    await client.append('INBOX', report);
    // What a reader that died right after its commit, longer ago than its hold on the move,
    // leaves: the report applied, still in the mailbox.
    const died = await readElsewhere(report, 'died', () => Date.now() - MOVE_HOLD_MS);
    expect(died.outcome).toBe('bounced');
    const events = await eventTypes(sent.id);
    expect(events).toEqual(['notification.sent', 'notification.bounced']);

    const { metrics, logs } = await startReaders(dovecot.url(user));
    await movedTo(client, 'Herald/Processed', 1);
    expect(await eventTypes(sent.id)).toEqual(events);
    await countedAs(metrics, { duplicate: 1 });
    expect(messages(logs, 'read before; moved to Herald/Processed')).toHaveLength(1);
  });

  it('a report another reader applied and still holds to move is left to it', async () => {
    const { user, client } = await mailbox();
    const sent = await sendThroughRelay();
    const report = delivered('postfix-dsn', sent);
    await client.append('INBOX', report);
    // Another reader, alive, between its apply and its move.
    expect((await readElsewhere(report, 'other')).outcome).toBe('bounced');
    const events = await eventTypes(sent.id);

    const { metrics, logs } = await startReaders(dovecot.url(user));
    await waitUntil(() => (messages(logs, "is another reader's to move").length > 0 ? true : undefined), {
      what: 'the reader to leave the report to the other',
    });
    expect(await Dovecot.uids(client, 'INBOX')).toHaveLength(1);
    expect(await Dovecot.uids(client, 'Herald/Processed')).toEqual([]);
    expect(await counted(metrics)).toEqual({});
    expect(await eventTypes(sent.id)).toEqual(events);
  });

  it('a message moved aside unread is moved by the reader that claims it: its own, or once its hold ran out', async () => {
    const where = `INBOX\n${Date.now()}\n7`;
    const parser = new ReportParser();
    const reader = (owner: string, now?: () => number) =>
      new ReportReceiver(ctx.services.storage.db, ctx.services.bounces, parser, owner, now);
    try {
      expect(await reader('a').setAside(where, 'too_large')).toBe(true);
      expect(await reader('b').setAside(where, 'too_large')).toBe(false);
      // Its own again (a move that failed is tried again); another once the hold ran out (a died).
      expect(await reader('a').setAside(where, 'too_large')).toBe(true);
      expect(await reader('c', () => Date.now() + MOVE_HOLD_MS).setAside(where, 'too_large')).toBe(true);
    } finally {
      await parser.close();
    }
  });

  it('two readers move a message over HERALD_BOUNCE_MAX_BYTES aside once', async () => {
    const { user, client } = await mailbox();
    const line = `${'x'.repeat(998)}\r\n`;
    dovecot.deliver(user, '1700000000.big2.test', `Subject: big\r\n\r\n${line.repeat(2 * 1024)}`);
    const both = await Promise.all([startReaders(dovecot.url(user)), startReaders(dovecot.url(user))]);
    await movedTo(client, 'Herald/Unrecognized', 1);
    // Both stopped: a move either of them started is over.
    await Promise.all(both.map(({ readers }) => readers.close()));
    expect(await Dovecot.uids(client, 'Herald/Unrecognized')).toHaveLength(1);
    const counts = await Promise.all(both.map(({ metrics }) => counted(metrics)));
    expect(counts.reduce((sum, c) => sum + (c.too_large ?? 0), 0)).toBe(1);
    expect(both.flatMap(({ logs }) => messages(logs, 'moved unread'))).toHaveLength(1);
  });
});

suite('trouble with the server', () => {
  it('a mailbox that disappears is logged and waited for; once back, its reports are read', async () => {
    const { user, client } = await mailbox();
    await client.mailboxCreate('Bounces');
    const { logs, metrics } = await startReaders(dovecot.url(user, 'Bounces'));
    await waitUntil(() => (messages(logs, 'IMAP IDLE').length > 0 ? true : undefined));
    await client.mailboxDelete('Bounces').catch((error: { responseText?: string }) => {
      throw new Error(`DELETE: ${error.responseText}\n${dovecot.log()}`);
    });
    await waitUntil(
      () => (messages(logs, 'the mailbox Bounces does not exist').length > 0 ? true : undefined),
      {
        what: 'the missing mailbox in the log',
      },
    );
    expect((await metrics.bounceImapConnected.get()).values[0]!.value).toBe(0);
    await client.mailboxCreate('Bounces').catch((error: { responseText?: string }) => {
      throw new Error(`CREATE: ${error.responseText}\n${dovecot.log()}`);
    });
    const sent = await sendThroughRelay();
    await client.append('Bounces', delivered('postfix-dsn', sent));
    await movedTo(client, 'Herald/Processed', 1, 'Bounces');
    expect((await statusOf(ctx.app, project.apiKey, sent.requestId)).status).toBe('failed');
    expect(messages(logs, 'watching again')).toHaveLength(1);
    // Logged once however often it was tried.
    expect(messages(logs, 'does not exist').filter((l) => l.level === 50)).toHaveLength(1);
  });

  it('a wrong password: one clear log line, retried with a back-off, and read once it is right', async () => {
    const { user, client } = await mailbox();
    const { logs, metrics } = await startReaders(dovecot.url(user, 'INBOX', 'not-the-password'));
    const failures = () =>
      dovecot
        .log()
        .split('\n')
        .filter((l) => l.includes(`user=<${user}>`) && /auth failed/i.test(l));
    await waitUntil(() => (failures().length >= 2 ? true : undefined), {
      what: () => `two refused logins in the server's log:\n${dovecot.log()}`,
    });
    const errors = logs.filter((line) => line.level === 50);
    expect(errors).toHaveLength(1);
    expect(String(errors[0]!.msg)).toMatch(
      /^bounce mailbox imap:\/\/box\d+%40example\.org@127\.0\.0\.1:\d+\/INBOX\?tls=none: the IMAP server refused the user name or password; trying again in 100 ms/,
    );
    expect(JSON.stringify(logs)).not.toContain('not-the-password');
    expect((await metrics.bounceImapConnected.get()).values[0]!.value).toBe(0);

    dovecot.setUser(user, 'not-the-password');
    await waitUntil(() => (messages(logs, 'watching again').length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the login once the password is right',
    });
    const sent = await sendThroughRelay();
    await client.append('INBOX', delivered('postfix-dsn', sent));
    await waitUntil(async () =>
      (await statusOf(ctx.app, project.apiKey, sent.requestId)).status === 'failed' ? true : undefined,
    );
  });

  it('a 50 MB message is moved to Herald/Unrecognized unread, and the next report is read', async () => {
    const { user, client } = await mailbox();
    const line = `${'x'.repeat(998)}\r\n`;
    dovecot.deliver(
      user,
      '1700000000.big.test',
      `Subject: big\r\nFrom: a@example.net\r\n\r\n${line.repeat(50 * 1024)}`,
    );
    const { logs, metrics } = await startReaders(dovecot.url(user));
    await movedTo(client, 'Herald/Unrecognized', 1).catch((error: Error) => {
      throw new Error(`${error.message}\n${JSON.stringify(logs)}\n${dovecot.log()}`);
    });
    expect(messages(logs, 'over HERALD_BOUNCE_MAX_BYTES; moved unread')).toHaveLength(1);
    const sent = await sendThroughRelay();
    await client.append('INBOX', delivered('postfix-dsn', sent));
    await movedTo(client, 'Herald/Processed', 1);
    await countedAs(metrics, { too_large: 1, bounced: 1 });
  }, 60_000);
});
