import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import nodemailer from 'nodemailer';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyBounceAddress, bounceToken } from '../../src/bounces/token.js';
import type { BounceReaders } from '../../src/bounces/readers.js';
import { createBounceReaders, createWorker, type Worker } from '../../src/roles.js';
import { loadBounceFixture, type BounceFixture } from '../fixtures/bounces/load.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink, type ReceivedMessage } from '../helpers/smtp-sink.js';
import { settledStatus, statusOf } from '../helpers/http.js';
import { hostileReport } from '../helpers/hostile-report.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Bounce and complaint intake end to end (product.md §5, docs/webhooks.md): a message goes out
 * through the worker to a real SMTP relay in this process with its Return-Path
 * `bounces+<token>@bounces.example.com`; the fixtures' reports come back to Herald's own inbound
 * SMTP listener over a real SMTP client (nodemailer, null sender `<>` as real bounces have), and
 * the notification, the suppression list, the usage counters and the webhook outbox change exactly
 * as documented, or not at all for a forged, foreign, oversized or unreadable report.
 */

const DOMAIN = 'bounces.example.com';
/** HERALD_BOUNCE_MAX_BYTES: above every fixture (the largest is under 3 KB), below the padded one. */
const MAX_BYTES = 8192;

let ctx: TestContext;
let sink: SmtpSink;
let worker: Worker;
let readers: BounceReaders;
let listenerPort: number;
/** A listener that takes reports up to 1 MiB (the default), for the report that is slow to parse. */
let bigReaders: BounceReaders;
let bigPort: number;
let project: { projectId: number; apiKey: string; name: string };
let receiver: http.Server;

/** Deliveries the webhook receiver accepted, each signature checked with standardwebhooks. */
const received: { id: string; type: string; body: Record<string, unknown> }[] = [];
let verifier: Webhook | null = null;
let badSignatures = 0;

interface SentMessage {
  readonly requestId: string;
  readonly id: number;
  readonly to: string;
  /** The Message-ID without angle brackets, as the fixtures want it. */
  readonly messageId: string;
  /** MAIL FROM as the relay received it. */
  readonly returnPath: string;
  readonly atRelay: ReceivedMessage;
}

let counter = 0;
function uniqueRecipient(label: string): string {
  counter++;
  return `${label}-${counter}@example.org`;
}

const status = (requestId: string) => statusOf(ctx.app, project.apiKey, requestId);

async function accept(to: string): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${project.apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jane', role: 'buyer' } },
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

const settled = (requestId: string) => settledStatus(ctx.app, project.apiKey, requestId);

/** Sends one notification through the relay and returns what the relay received. */
async function sendThroughRelay(to: string): Promise<SentMessage> {
  const requestId = await accept(to);
  const body = await settled(requestId);
  expect(body).toMatchObject({ status: 'sent', transport: 'smtp' });
  const atRelay = await waitUntil(
    () => sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId),
    { what: `the relay to receive ${requestId}` },
  );
  const { notification } = await ctx.services.notifications.detail(requestId);
  expect(notification.message_id).not.toBeNull();
  expect(atRelay.parsed.messageId).toBe(`<${notification.message_id}>`);
  // The sent event is in the outbox and reaches the receiver before any report is sent, so what
  // the receiver sees later is what the report caused.
  await waitUntil(() => (eventsAtReceiver(requestId).length > 0 ? true : undefined), {
    what: `notification.sent of ${requestId} at the receiver`,
  });
  return {
    requestId,
    id: body.id,
    to,
    messageId: notification.message_id!,
    returnPath: atRelay.envelopeFrom,
    atRelay,
  };
}

interface Fill {
  readonly tokenAddress: string;
  readonly messageId: string;
  readonly recipient: string;
}

function fixture(name: BounceFixture, message: SentMessage, overrides: Partial<Fill> = {}): Buffer {
  return loadBounceFixture(name, {
    tokenAddress: message.returnPath,
    messageId: message.messageId,
    recipient: message.to,
    ...overrides,
  });
}

interface SmtpOutcome {
  readonly ok: boolean;
  readonly responseCode: number | null;
  readonly accepted: string[];
  readonly rejected: string[];
  readonly rejectedCodes: number[];
  readonly response: string;
}

/** Sends a raw report to a listener over SMTP with the null sender `<>`, as bounces are sent. */
async function report(to: string | string[], raw: Buffer, port = listenerPort): Promise<SmtpOutcome> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    // One message per connection: nothing is carried over between reports.
    pool: false,
  });
  try {
    const info = await transport.sendMail({ envelope: { from: '', to }, raw });
    const rejectedErrors = (info as { rejectedErrors?: { responseCode?: number }[] }).rejectedErrors ?? [];
    return {
      ok: true,
      responseCode: Number(/^(\d{3})/.exec(info.response)?.[1] ?? 0),
      accepted: info.accepted.map(String),
      rejected: info.rejected.map(String),
      rejectedCodes: rejectedErrors.map((e) => e.responseCode ?? 0),
      response: info.response,
    };
  } catch (error) {
    const e = error as { responseCode?: number; response?: string; message: string };
    return {
      ok: false,
      responseCode: e.responseCode ?? null,
      accepted: [],
      rejected: [],
      rejectedCodes: [],
      response: e.response ?? e.message,
    };
  } finally {
    transport.close();
  }
}

type EventData = Record<string, unknown>;

async function eventsOf(
  notificationId: number,
): Promise<{ type: string; webhook_id: string; data: EventData }[]> {
  const rows = await ctx.services.storage.db
    .selectFrom('webhook_events')
    .select(['type', 'webhook_id', 'payload', 'id'])
    .where('notification_id', '=', notificationId)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    type: row.type,
    webhook_id: row.webhook_id,
    data: (JSON.parse(row.payload) as { data: EventData }).data,
  }));
}

function eventsAtReceiver(requestId: string): { id: string; type: string; body: Record<string, unknown> }[] {
  return received.filter((r) => (r.body.data as { request_id?: string }).request_id === requestId);
}

async function suppression(email: string) {
  return ctx.services.storage.db
    .selectFrom('suppressions')
    .selectAll()
    .where('project_id', '=', project.projectId)
    .where('email', '=', email.toLowerCase())
    .executeTakeFirst();
}

/** Everything a report could change about one message, to compare before and after. */
async function snapshot(message: SentMessage) {
  return {
    status: await status(message.requestId),
    events: await eventsOf(message.id),
    suppression: (await suppression(message.to)) ?? null,
    usage: await ctx.services.usage.totals(project.projectId),
  };
}

beforeAll(async () => {
  sink = await new SmtpSink().start();
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      try {
        verifier!.verify(raw, req.headers as Record<string, string>);
      } catch {
        badSignatures++;
        res.writeHead(400).end();
        return;
      }
      const body = JSON.parse(raw.toString('utf8')) as { type: string } & Record<string, unknown>;
      received.push({ id: String(req.headers['webhook-id']), type: body.type, body });
      res.writeHead(204).end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');

  ctx = await createTestContext({
    HERALD_BOUNCE_DOMAIN: DOMAIN,
    HERALD_BOUNCE_SMTP_PORT: '0',
    HERALD_BOUNCE_MAX_BYTES: String(MAX_BYTES),
    HERALD_BOUNCE_RATE_PER_MINUTE: '10000',
    HERALD_DELIVERY_POLL_MS: '20',
    HERALD_WEBHOOK_RETRY_BASE_MS: '200',
    HERALD_SMTP_TIMEOUT_MS: '5000',
  });
  expect(ctx.config.bounces.port).toBe(0);
  project = await seedProject(ctx.services, { fromEmail: 'orders@shop.example.com' });
  await ctx.services.smtpSettings.setFromUrl(project.projectId, sink.url);
  const { secret } = await ctx.services.webhooks.create(project.projectId, {
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
  });
  verifier = new Webhook(secret);

  // The worker with its mail and webhook queues, as `herald serve` runs it.
  worker = createWorker(ctx.services);
  worker.start();

  readers = await createBounceReaders(ctx.services);
  listenerPort = (await readers.start())!;
  bigReaders = await createBounceReaders({
    ...ctx.services,
    config: { ...ctx.config, bounces: { ...ctx.config.bounces, maxBytes: 1024 * 1024 } },
  });
  bigPort = (await bigReaders.start())!;
  expect(listenerPort).toBeGreaterThan(0);
});

afterAll(async () => {
  await readers?.close();
  await bigReaders?.close();
  await worker?.stop();
  await ctx?.close();
  await sink?.stop();
  await new Promise((resolve) => receiver?.close(resolve));
});

describe('the Return-Path of a sent message', () => {
  it('is bounces+<token>@the bounce domain, and the token names the notification', async () => {
    const message = await sendThroughRelay(uniqueRecipient('path'));
    expect(message.returnPath).toMatch(/^bounces\+[0-9a-z]+-[a-z2-7]{16}@bounces\.example\.com$/);
    expect(message.returnPath).toBe(`bounces+${bounceToken(ctx.services.bounceKey, message.id)}@${DOMAIN}`);
    expect(classifyBounceAddress(ctx.services.bounceKey, message.returnPath, DOMAIN)).toEqual({
      kind: 'token',
      id: message.id,
    });
    // The From header is the project's, not the bounce address.
    expect(message.atRelay.parsed.from?.value[0]?.address).toBe('orders@shop.example.com');
  });
});

describe('the test client', () => {
  it('sends reports with the null sender <>, as bounces are sent', async () => {
    const before = sink.messages.length;
    const outcome = await report('anyone@example.org', loadBounceFixture('not-a-report'), sink.port);
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    await sink.waitFor(before + 1);
    expect(sink.messages[before]!.envelopeFrom).toBe('');
    expect(sink.messages[before]!.raw.toString('utf8')).toBe(
      loadBounceFixture('not-a-report').toString('utf8'),
    );
  });
});

describe('hard bounces', () => {
  it('postfix DSN (5.1.1): failed, bounced_at, suppressed, counted, one notification.bounced', async () => {
    const message = await sendThroughRelay(uniqueRecipient('postfix'));
    const usageBefore = await ctx.services.usage.totals(project.projectId);
    const outcome = await report(message.returnPath, fixture('postfix-dsn', message));
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });

    const body = await status(message.requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toMatch(/^Bounced: 550 5\.1\.1 /);
    expect(body.error_message).toBe(
      `Bounced: 550 5.1.1 <${message.to}>: Recipient address rejected: User unknown in virtual mailbox table`,
    );
    expect(body.bounced_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(body.sent_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(Date.parse(body.bounced_at!)).toBeGreaterThanOrEqual(Date.parse(body.sent_at!));
    // How it went out stays visible after it bounced.
    expect(body).toMatchObject({ transport: 'smtp', relay: 'primary' });

    expect(await suppression(message.to)).toMatchObject({
      reason: 'hard_bounce',
      request_id: message.requestId,
    });
    const usageAfter = await ctx.services.usage.totals(project.projectId);
    expect(usageAfter.sent).toBe(usageBefore.sent - 1);
    expect(usageAfter.failed).toBe(usageBefore.failed + 1);

    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
    const bounced = events[1]!;
    expect(bounced.data).toMatchObject({
      request_id: message.requestId,
      status: 'failed',
      error_message: body.error_message,
      bounced_at: body.bounced_at,
      transport: 'smtp',
      relay: 'primary',
      project: project.name,
      bounce: {
        type: 'hard',
        category: 'user_unknown',
        status: '5.1.1',
        diagnostic: body.error_message!.slice('Bounced: '.length),
      },
    });
    // The status body says why in one word, as the event does; the suppression entry names it.
    expect(body.bounce).toEqual((bounced.data as { bounce: unknown }).bounce);
    expect((await suppression(message.to))?.detail).toMatch(/^user_unknown: 550 5\.1\.1 /);
    // Delivered, signed, to the endpoint.
    const delivered = await waitUntil(
      () => eventsAtReceiver(message.requestId).find((r) => r.type === 'notification.bounced'),
      { what: 'notification.bounced at the receiver' },
    );
    expect(delivered.id).toBe(bounced.webhook_id);
    expect(badSignatures).toBe(0);
  });

  it('a DSN without the original (5.2.1, a disabled mailbox), through the token: failed, not suppressed', async () => {
    const message = await sendThroughRelay(uniqueRecipient('disabled'));
    const outcome = await report(message.returnPath, fixture('dsn-no-original', message));
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    const bounce = {
      type: 'soft',
      category: 'suspended',
      status: '5.2.1',
      diagnostic: '552 5.2.1 Mailbox disabled for this recipient',
    };
    expect(body).toMatchObject({
      status: 'failed',
      error_message: 'Bounced: 552 5.2.1 Mailbox disabled for this recipient',
      bounce,
    });
    expect(body.bounced_at).toBeDefined();
    // Disabled for now is no proof that the address is bad (product.md §9).
    expect(await suppression(message.to)).toBeUndefined();
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
    expect(events[1]!.data.bounce).toEqual(bounce);
  });

  it('a diagnostic with NUL and control characters is stored as one clean line, on either backend', async () => {
    const message = await sendThroughRelay(uniqueRecipient('nul'));
    const raw = fixture('dsn-no-original', message)
      .toString('latin1')
      .replaceAll('Mailbox disabled', 'Mailbox\u0000\u0000\u0000 disabled\u0001');
    const outcome = await report(message.returnPath, Buffer.from(raw, 'latin1'));
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    expect(body).toMatchObject({
      status: 'failed',
      error_message: 'Bounced: 552 5.2.1 Mailbox disabled for this recipient',
      bounce: { category: 'suspended', diagnostic: '552 5.2.1 Mailbox disabled for this recipient' },
    });
  });

  it('an Exim plain-text bounce: failed and suppressed', async () => {
    const message = await sendThroughRelay(uniqueRecipient('exim'));
    // Sent back by a relay that changed the case of the address: the token is read regardless.
    const shouted = message.returnPath.toUpperCase();
    const outcome = await report(shouted, fixture('exim-bounce', message, { tokenAddress: shouted }));
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toMatch(/^Bounced: 550 5\.1\.1 /);
    expect(await suppression(message.to)).toMatchObject({ reason: 'hard_bounce' });
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
    expect(events[1]!.data.bounce).toMatchObject({ type: 'hard', category: 'user_unknown', status: '5.1.1' });
  });

  it('a policy rejection (5.7.1) fails the message but suppresses nothing', async () => {
    const message = await sendThroughRelay(uniqueRecipient('policy'));
    const outcome = await report(message.returnPath, fixture('dsn-policy', message));
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toMatch(/^Bounced: 550 5\.7\.1 Service unavailable/);
    expect(body.bounced_at).toBeDefined();
    expect(await suppression(message.to)).toBeUndefined();
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
    // "client [192.0.2.10] blocked": the sending address is blocked, not the recipient's.
    expect(events[1]!.data.bounce).toMatchObject({ type: 'soft', category: 'blocked', status: '5.7.1' });
  });

  // An MTA that got no 250 in time sends the report again, possibly while the first is still being
  // stored: whatever the interleaving, one bounce is one event (one webhook-id).
  it('the same report on several connections at once is applied once', async () => {
    const message = await sendThroughRelay(uniqueRecipient('concurrent'));
    const raw = fixture('postfix-dsn', message);
    // Four connections: within the listener's bound of five at once per client address.
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => report(message.returnPath, raw)));
    expect(outcomes.map((o) => o.responseCode)).toEqual([250, 250, 250, 250]);
    expect((await status(message.requestId)).status).toBe('failed');
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
  });

  it('the same report twice: the second changes nothing and writes no second event', async () => {
    const message = await sendThroughRelay(uniqueRecipient('twice'));
    const raw = fixture('postfix-dsn', message);
    expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    const first = await snapshot(message);
    expect(first.status.status).toBe('failed');
    expect(first.events).toHaveLength(2);
    expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await snapshot(message)).toEqual(first);
  });
});

describe('reports without a token', () => {
  it('a DSN to plain bounces@ is matched by the returned Message-ID and recipient', async () => {
    const message = await sendThroughRelay(uniqueRecipient('plain'));
    const plain = `bounces@${DOMAIN}`;
    const raw = fixture('dsn-with-headers-only', message, { tokenAddress: plain });
    expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toBe(`Bounced: 550 5.1.1 <${message.to}>... User unknown`);
    expect(await suppression(message.to)).toMatchObject({ reason: 'hard_bounce' });
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
  });

  it('with a Message-ID Herald did not send, or another recipient, nothing changes', async () => {
    const message = await sendThroughRelay(uniqueRecipient('plain-wrong'));
    const other = await sendThroughRelay(uniqueRecipient('plain-other'));
    const plain = `bounces@${DOMAIN}`;
    const before = await snapshot(message);
    const [local, domain] = message.messageId.split('@') as [string, string];
    const wrongIds = [
      // Another request id at the right domain, and the right request id at another domain.
      `00000000-0000-4000-8000-000000000000@${domain}`,
      `${local}@elsewhere.example`,
      // Another message's id with this message's recipient.
      other.messageId,
    ];
    for (const messageId of wrongIds) {
      const raw = fixture('dsn-with-headers-only', message, { tokenAddress: plain, messageId });
      expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    }
    // The right Message-ID, but the report names another recipient.
    const raw = fixture('dsn-with-headers-only', message, {
      tokenAddress: plain,
      recipient: 'someone-else@example.org',
    });
    expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await snapshot(message)).toEqual(before);
    expect((await status(other.requestId)).status).toBe('sent');
    expect(await eventsOf(other.id)).toHaveLength(1);
  });

  it('a returned Message-ID with a NUL in it is read without it, on either backend', async () => {
    // Anyone can send this to plain bounces@; PostgreSQL text cannot hold a NUL, so the look-up
    // must not be given one (it failed, and the report was refused with a 4xx for ever).
    const message = await sendThroughRelay(uniqueRecipient('plain-nul'));
    const plain = `bounces@${DOMAIN}`;
    const [local, domain] = message.messageId.split('@') as [string, string];
    const raw = fixture('dsn-with-headers-only', message, {
      tokenAddress: plain,
      messageId: `${local}\u0000@${domain}`,
    });
    expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect((await status(message.requestId)).status).toBe('failed');
  });

  it('naming a message that failed before it was ever sent, nothing changes', async () => {
    // Refused at RCPT TO for policy (5.7.1, which suppresses nothing): the message has a
    // Message-ID but no SMTP transaction ever carried it, so no report can be about it.
    const to = uniqueRecipient('never-sent');
    sink.rejectRecipients.set(to, [550, '5.7.1 Relaying denied by policy']);
    const requestId = await accept(to);
    const body = await settled(requestId);
    expect(body).toMatchObject({ status: 'failed' });
    const { notification } = await ctx.services.notifications.detail(requestId);
    expect(notification.message_id).not.toBeNull();
    expect(notification.sent_at).toBeNull();
    expect(await suppression(to)).toBeUndefined();
    const before = {
      status: await status(requestId),
      events: await eventsOf(body.id),
      usage: await ctx.services.usage.totals(project.projectId),
    };

    const plain = `bounces@${DOMAIN}`;
    const raw = loadBounceFixture('dsn-with-headers-only', {
      tokenAddress: plain,
      messageId: notification.message_id!,
      recipient: to,
    });
    expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    // Nor a complaint: no inbox ever held the message.
    const complaint = loadBounceFixture('arf-complaint', {
      tokenAddress: plain,
      messageId: notification.message_id!,
      recipient: to,
    });
    expect(await report(plain, complaint)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await suppression(to)).toBeUndefined();
    expect({
      status: await status(requestId),
      events: await eventsOf(body.id),
      usage: await ctx.services.usage.totals(project.projectId),
    }).toEqual(before);
  });

  it('postmaster@ the bounce domain is accepted (RFC 5321) and read like bounces@', async () => {
    const message = await sendThroughRelay(uniqueRecipient('postmaster'));
    const postmaster = `Postmaster@${DOMAIN}`;
    const raw = fixture('dsn-with-headers-only', message, { tokenAddress: postmaster });
    expect(await report(postmaster, raw)).toMatchObject({ ok: true, responseCode: 250 });
    const body = await status(message.requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toMatch(/^Bounced: 550 5\.1\.1 /);
    expect(await suppression(message.to)).toMatchObject({ reason: 'hard_bounce' });
  });

  it('takes `Postmaster` with no domain too (RFC 5321 §4.5.1)', async () => {
    const message = await sendThroughRelay(uniqueRecipient('bare-postmaster'));
    const raw = fixture('dsn-with-headers-only', message, { tokenAddress: `postmaster@${DOMAIN}` });
    expect(await report('Postmaster', raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect((await status(message.requestId)).status).toBe('failed');
  });

  it('a complaint from a feedback loop to plain bounces@ is matched the same way', async () => {
    const message = await sendThroughRelay(uniqueRecipient('fbl'));
    const plain = `bounces@${DOMAIN}`;
    // Another recipient with this message's Message-ID: not about this message.
    const stranger = fixture('arf-complaint', message, {
      tokenAddress: plain,
      recipient: 'someone-else@example.org',
    });
    const before = await snapshot(message);
    expect(await report(plain, stranger)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await snapshot(message)).toEqual(before);
    expect(await suppression('someone-else@example.org')).toBeUndefined();

    const raw = fixture('arf-complaint', message, { tokenAddress: plain });
    expect(await report(plain, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect((await status(message.requestId)).status).toBe('sent');
    expect(await suppression(message.to)).toMatchObject({
      reason: 'complaint',
      request_id: message.requestId,
    });
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.complained']);
  });
});

describe('soft bounces and complaints', () => {
  it('a delay warning (4.4.7): still sent, a soft notification.bounced, not suppressed', async () => {
    const message = await sendThroughRelay(uniqueRecipient('delayed'));
    const before = await status(message.requestId);
    const usageBefore = await ctx.services.usage.totals(project.projectId);
    expect(await report(message.returnPath, fixture('dsn-delayed', message))).toMatchObject({
      ok: true,
      responseCode: 250,
    });
    // Still sent; the status body keeps the report's reading as its bounce.
    const after = await status(message.requestId);
    expect(after).toEqual({ ...before, bounce: after.bounce });
    expect(after.bounce).toMatchObject({ type: 'soft', status: '4.4.7' });
    expect(await suppression(message.to)).toBeUndefined();
    expect(await ctx.services.usage.totals(project.projectId)).toEqual(usageBefore);
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.bounced']);
    expect(events[1]!.data).toMatchObject({ status: 'sent', bounce: after.bounce });
    expect(events[1]!.data.bounced_at).toBeUndefined();
    await waitUntil(
      () => eventsAtReceiver(message.requestId).find((r) => r.type === 'notification.bounced'),
      { what: 'the soft notification.bounced at the receiver' },
    );
  });

  it('a delay notice after the hard bounce changes nothing: the hard bounce stays on record', async () => {
    const message = await sendThroughRelay(uniqueRecipient('hard-then-delayed'));
    await report(message.returnPath, fixture('dsn-with-headers-only', message));
    const bounced = await status(message.requestId);
    expect(bounced).toMatchObject({ status: 'failed', bounce: { type: 'hard' } });
    const events = await eventsOf(message.id);

    expect(await report(message.returnPath, fixture('dsn-delayed', message))).toMatchObject({
      ok: true,
      responseCode: 250,
    });
    expect(await status(message.requestId)).toEqual(bounced);
    expect(await eventsOf(message.id)).toEqual(events);
  });

  it('an ARF complaint: status unchanged, suppressed as complaint, notification.complained', async () => {
    const message = await sendThroughRelay(uniqueRecipient('complaint'));
    const before = await status(message.requestId);
    expect(await report(message.returnPath, fixture('arf-complaint', message))).toMatchObject({
      ok: true,
      responseCode: 250,
    });
    expect(await status(message.requestId)).toEqual(before);
    expect(await suppression(message.to)).toMatchObject({
      reason: 'complaint',
      request_id: message.requestId,
      detail: 'Feedback-Type: abuse',
    });
    const events = await eventsOf(message.id);
    expect(events.map((e) => e.type)).toEqual(['notification.sent', 'notification.complained']);
    expect(events[1]!.data).toMatchObject({
      status: 'sent',
      request_id: message.requestId,
      complaint: { feedback_type: 'abuse' },
      project: project.name,
    });
    await waitUntil(
      () => eventsAtReceiver(message.requestId).find((r) => r.type === 'notification.complained'),
      { what: 'notification.complained at the receiver' },
    );
  });

  // As with a bounce (above): a report delivered twice is one event, or a receiver that
  // de-duplicates by webhook-id, as docs/webhooks.md tells it to, handles the complaint twice.
  it('the same complaint twice writes no second event', async () => {
    const message = await sendThroughRelay(uniqueRecipient('complaint-twice'));
    const raw = fixture('arf-complaint', message);
    expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    const first = await snapshot(message);
    expect(first.events.map((e) => e.type)).toEqual(['notification.sent', 'notification.complained']);
    expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await snapshot(message)).toEqual(first);
  });
});

describe('the suppression list at the next send', () => {
  it('a send to an address a bounce suppressed fails without an SMTP transaction', async () => {
    const message = await sendThroughRelay(uniqueRecipient('next'));
    expect(await report(message.returnPath, fixture('postfix-dsn', message))).toMatchObject({
      ok: true,
      responseCode: 250,
    });
    expect(await suppression(message.to)).toMatchObject({ reason: 'hard_bounce' });
    const atRelay = sink.messages.length;
    // Case-insensitive: the list holds the lowercased address.
    const next = await accept(message.to.toUpperCase());
    const body = await settled(next);
    expect(body).toMatchObject({
      status: 'failed',
      error_message: 'Recipient is suppressed (hard_bounce)',
    });
    expect(sink.messages.length).toBe(atRelay);
    expect(sink.messages.some((m) => m.parsed.headers.get('x-herald-request-id') === next)).toBe(false);
    const { notification } = await ctx.services.notifications.detail(next);
    expect((await eventsOf(notification.id)).map((e) => e.type)).toEqual(['notification.failed']);
  });

  it('so does a send to an address a complaint suppressed', async () => {
    const message = await sendThroughRelay(uniqueRecipient('next-complaint'));
    expect(await report(message.returnPath, fixture('arf-complaint', message))).toMatchObject({
      ok: true,
      responseCode: 250,
    });
    const atRelay = sink.messages.length;
    const body = await settled(await accept(message.to));
    expect(body).toMatchObject({ status: 'failed', error_message: 'Recipient is suppressed (complaint)' });
    expect(sink.messages.length).toBe(atRelay);
  });
});

describe('what the listener refuses', () => {
  /** A token for the same notification with one MAC character changed. */
  function forge(returnPath: string): string {
    const match = /^bounces\+([0-9a-z]+)-([a-z2-7]{16})@(.+)$/.exec(returnPath)!;
    const mac = match[2]!;
    const last = mac.at(-1) === 'a' ? 'b' : 'a';
    return `bounces+${match[1]}-${mac.slice(0, -1)}${last}@${match[3]}`;
  }

  it('a token with a changed MAC character is refused at RCPT TO and changes nothing', async () => {
    const message = await sendThroughRelay(uniqueRecipient('forged'));
    const before = await snapshot(message);
    const forged = forge(message.returnPath);
    expect(classifyBounceAddress(ctx.services.bounceKey, forged, DOMAIN)).toEqual({ kind: 'forged' });
    // The MAC also covers each character of the id.
    const otherId = message.returnPath.replace(
      /^bounces\+([0-9a-z]+)-/,
      (_, id: string) => `bounces+${(parseInt(id, 36) + 1).toString(36)}-`,
    );
    for (const address of [forged, otherId]) {
      const outcome = await report(address, fixture('postfix-dsn', message, { tokenAddress: address }));
      expect(outcome, address).toMatchObject({ ok: false, responseCode: 550 });
    }
    expect(await snapshot(message)).toEqual(before);
  });

  it('a report through a valid token about another recipient changes nothing', async () => {
    const message = await sendThroughRelay(uniqueRecipient('other-rcpt'));
    const before = await snapshot(message);
    const raw = fixture('postfix-dsn', message, { recipient: 'someone-else@example.org' });
    expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    expect(await snapshot(message)).toEqual(before);
    expect(await suppression('someone-else@example.org')).toBeUndefined();
  });

  it('a well-formed token of a notification that does not exist is refused', async () => {
    const message = await sendThroughRelay(uniqueRecipient('unknown-id'));
    const before = await snapshot(message);
    const address = `bounces+${bounceToken(ctx.services.bounceKey, 999_999)}@${DOMAIN}`;
    expect(classifyBounceAddress(ctx.services.bounceKey, address, DOMAIN)).toEqual({
      kind: 'token',
      id: 999_999,
    });
    const outcome = await report(address, fixture('postfix-dsn', message, { tokenAddress: address }));
    expect(outcome).toMatchObject({ ok: false, responseCode: 550 });
    expect(await snapshot(message)).toEqual(before);
  });

  it('never relays: other mailboxes and other domains are refused at RCPT TO', async () => {
    const message = await sendThroughRelay(uniqueRecipient('relay'));
    const before = await snapshot(message);
    const token = bounceToken(ctx.services.bounceKey, message.id);
    for (const address of [
      `someone@${DOMAIN}`,
      `bounces+x@other.example`,
      `bounces@other.example`,
      `postmaster@other.example`,
      `postmaster@sub.${DOMAIN}`,
      // A valid token at another domain, and at a subdomain of the bounce domain.
      `bounces+${token}@other.example`,
      `bounces+${token}@sub.${DOMAIN}`,
      'jane@example.org',
    ]) {
      const outcome = await report(address, fixture('postfix-dsn', message, { tokenAddress: address }));
      expect(outcome, address).toMatchObject({ ok: false, responseCode: 550 });
    }
    expect(await snapshot(message)).toEqual(before);
  });

  it('a report larger than HERALD_BOUNCE_MAX_BYTES is refused with 552 and changes nothing', async () => {
    const message = await sendThroughRelay(uniqueRecipient('oversized'));
    const before = await snapshot(message);
    const raw = fixture('postfix-dsn', message).toString('utf8');
    // The same valid report, made too large by a longer human-readable part.
    const padding = `${'x'.repeat(70)}\r\n`.repeat(Math.ceil(MAX_BYTES / 72));
    const marker = 'This is the mail system at host mail.example.com.\r\n';
    expect(raw).toContain(marker);
    const oversized = Buffer.from(raw.replace(marker, marker + padding), 'utf8');
    expect(oversized.length).toBeGreaterThan(MAX_BYTES);
    const outcome = await report(message.returnPath, oversized);
    expect(outcome).toMatchObject({ ok: false, responseCode: 552 });
    expect(await snapshot(message)).toEqual(before);
  });

  it('takes at most 10 recipients: the extras get 452', async () => {
    const messages: SentMessage[] = [];
    for (let i = 0; i < 11; i++) messages.push(await sendThroughRelay(uniqueRecipient('many')));
    const before = await Promise.all(messages.map(snapshot));
    // An ordinary auto-reply: accepted, and nothing changes for any of the eleven.
    const outcome = await report(
      messages.map((m) => m.returnPath),
      fixture('not-a-report', messages[0]!),
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.responseCode).toBe(250);
    expect(outcome.accepted).toEqual(messages.slice(0, 10).map((m) => m.returnPath));
    expect(outcome.rejected).toEqual([messages[10]!.returnPath]);
    expect(outcome.rejectedCodes).toEqual([452]);
    expect(await Promise.all(messages.map(snapshot))).toEqual(before);
  });

  it('a message that is not a report is accepted with 250 and changes nothing', async () => {
    const message = await sendThroughRelay(uniqueRecipient('autoreply'));
    const before = await snapshot(message);
    for (const to of [message.returnPath, `bounces@${DOMAIN}`]) {
      const outcome = await report(to, fixture('not-a-report', message, { tokenAddress: to }));
      expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    }
    expect(await snapshot(message)).toEqual(before);
  });
});

describe('HERALD_BOUNCE_RATE_PER_MINUTE', () => {
  it('answers 421 to the fourth report from one client when the limit is 3', async () => {
    const limited = await createBounceReaders({
      ...ctx.services,
      config: { ...ctx.config, bounces: { ...ctx.config.bounces, perClientPerMinute: 3 } },
    });
    const port = (await limited.start())!;
    try {
      const message = await sendThroughRelay(uniqueRecipient('rate'));
      const raw = fixture('not-a-report', message);
      const outcomes: SmtpOutcome[] = [];
      for (let i = 0; i < 4; i++) outcomes.push(await report(message.returnPath, raw, port));
      expect(outcomes.map((o) => o.responseCode)).toEqual([250, 250, 250, 421]);
      expect(outcomes[3]!.ok).toBe(false);
      // The limit is the test listener's own: the main listener still takes reports.
      expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
    } finally {
      await limited.close();
    }
  });
});

describe('parsing off the event loop (issue 27, finding 4)', () => {
  it('a report that takes the parser the better part of a second is parsed in the thread, not on the event loop', async () => {
    const before = readers.parser.parsed;
    const outcome = await report(`bounces@${DOMAIN}`, hostileReport(DOMAIN), bigPort);
    expect(outcome).toMatchObject({ ok: true, responseCode: 250 });
    expect(bigReaders.parser.parsed).toBe(1);
    expect(readers.parser.parsed).toBe(before);
  });

  it('past the waiting reports it may hold, the listener answers 451 4.3.2, and the report sent again is applied', async () => {
    const full = await createBounceReaders(ctx.services, {
      parser: { threads: 1, maxWaiting: 0, deadlineMs: 30_000 },
    });
    const port = (await full.start())!;
    try {
      const message = await sendThroughRelay(uniqueRecipient('busy'));
      const raw = fixture('postfix-dsn', message);
      const busy = await report(message.returnPath, raw, port);
      expect(busy).toMatchObject({ ok: false, responseCode: 451 });
      expect(busy.response).toContain('4.3.2');
      expect(full.parser.refused).toBe(1);
      expect((await status(message.requestId)).status).toBe('sent');
      // What the sender's retry finds: a listener with room applies it.
      expect(await report(message.returnPath, raw)).toMatchObject({ ok: true, responseCode: 250 });
      expect((await status(message.requestId)).status).toBe('failed');
    } finally {
      await full.close();
    }
  });
});
