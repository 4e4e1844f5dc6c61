import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { NOTIFICATION_EVENTS } from '../../src/domain/events.js';
import { parseOutboundAllow, type OutboundPolicy } from '../../src/domain/outbound.js';
import type { WebhookDelivery } from '../../src/services/webhooks.js';
import type { BounceRecipient } from '../../src/domain/bounce/feedback-report.js';
import { findNotification } from '../../src/storage/notifications.js';
import { recordEvents } from '../../src/storage/webhook-events.js';
import { bearer, settledStatus, statusOf } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * Webhooks end to end (product.md §5, §8; docs/webhooks.md): HTTP send → worker → a real SMTP
 * server → the outbox → the webhook dispatcher → a real HTTP receiver in this process that checks
 * every delivery with the `standardwebhooks` library, as a caller's receiver would.
 */

// ---------------------------------------------------------------------------------------------
// The receiver

interface WebhookBody {
  readonly type: string;
  readonly timestamp: string;
  readonly data: Record<string, unknown>;
}

/** One request the receiver got. */
interface Hit {
  readonly n: number;
  readonly headers: Record<string, string>;
  readonly raw: Buffer;
  /** The body as `Webhook.verify` returned it; null when the signature did not verify. */
  readonly event: WebhookBody | null;
  readonly verifyError: string | null;
  readonly id: string;
}

/** What the receiver answers a request with. */
type Reply = number | 'hang' | { status: number; body?: string; headers?: Record<string, string> };

class Receiver {
  readonly hits: Hit[] = [];
  /** TCP connections accepted. */
  connections = 0;
  /** Requests received and not yet answered or closed. */
  open = 0;
  maxOpen = 0;
  /** Requests closed by the caller before they were answered (Herald gave up on them). */
  abandoned = 0;
  /** The endpoint's `whsec_…` secret, set once the endpoint exists. */
  secret = '';
  /** The answer to the n-th request (1-based). */
  reply: (n: number, hit: Hit) => Reply = () => 204;
  /** Called for every request, once its body arrived (before it is answered). */
  onHit: ((hit: Hit) => void) | null = null;
  /** While set, answers wait for it. */
  hold: Promise<void> | null = null;
  private readonly server: http.Server;

  constructor() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', () => this.connections++);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.open++;
    this.maxOpen = Math.max(this.maxOpen, this.open);
    let answered = false;
    res.on('finish', () => (answered = true));
    res.on('close', () => {
      this.open--;
      if (!answered) this.abandoned++;
    });
    res.on('error', () => {});
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => {});
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === 'string') headers[name] = value;
      let event: WebhookBody | null = null;
      let verifyError: string | null = null;
      try {
        event = new Webhook(this.secret).verify(raw, headers) as WebhookBody;
      } catch (error) {
        verifyError = (error as Error).message;
      }
      const hit: Hit = {
        n: this.hits.length + 1,
        headers,
        raw,
        event,
        verifyError,
        id: headers['webhook-id'] ?? '',
      };
      this.hits.push(hit);
      this.onHit?.(hit);
      const reply = event === null ? 400 : this.reply(hit.n, hit);
      if (reply === 'hang') return;
      const { status, body, headers: extra } = typeof reply === 'number' ? { status: reply } : reply;
      const answer = () => {
        res.writeHead(status, extra);
        res.end(body);
      };
      if (this.hold === null) answer();
      else void this.hold.then(answer);
    });
  }

  async start(port = 0): Promise<this> {
    this.server.listen(port, '127.0.0.1');
    await once(this.server, 'listening');
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/herald`;
  }

  /** Holds every answer until the returned function is called. */
  holdAnswers(): () => void {
    let release!: () => void;
    this.hold = new Promise((resolve) => (release = resolve));
    return release;
  }

  /** Hits whose signature verified, of one type. */
  of(type: string): Hit[] {
    return this.hits.filter((hit) => hit.event?.type === type);
  }

  waitForHits(count: number, what = `${count} webhook calls`): Promise<Hit[]> {
    return waitUntil(() => (this.hits.length >= count ? this.hits.slice() : undefined), { what });
  }

  async stop(): Promise<void> {
    if (!this.server.listening) return;
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}

const receivers: Receiver[] = [];

async function receiver(port = 0): Promise<Receiver> {
  const r = await new Receiver().start(port);
  receivers.push(r);
  return r;
}

async function stopReceivers(): Promise<void> {
  await Promise.all(receivers.splice(0).map((r) => r.stop()));
}

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

// ---------------------------------------------------------------------------------------------
// Herald: services and the worker (mail and webhook queues), as `herald serve --role all` runs them

const BASE_ENV = {
  HERALD_DELIVERY_POLL_MS: '20',
  HERALD_DELIVERY_RETRY_BASE_MS: '20',
  HERALD_DELIVERY_MAX_ATTEMPTS: '3',
  HERALD_SMTP_TIMEOUT_MS: '5000',
  HERALD_STOP_TIMEOUT_MS: '5000',
  HERALD_WEBHOOK_RETRY_BASE_MS: '50',
};

interface Stack {
  readonly ctx: TestContext;
  readonly worker: Worker;
  stop(): Promise<void>;
}

async function startStack(env: Record<string, string>): Promise<Stack> {
  const ctx = await createTestContext({ ...BASE_ENV, ...env });
  const worker = createWorker(ctx.services);
  worker.start();
  return {
    ctx,
    worker,
    async stop() {
      // Receivers first: a call held open by a receiver that never answers ends at once.
      await stopReceivers();
      await worker.stop();
      await ctx.close();
    },
  };
}

let sink: SmtpSink;
beforeAll(async () => {
  sink = await new SmtpSink().start();
});
afterAll(() => sink.stop());
afterEach(() => {
  sink.rejectRecipients.clear();
  sink.failNext = null;
});

/** Helpers bound to the stack of the describe block that is running. */
function helpers(context: () => TestContext) {
  const services = () => context().services;
  const db = () => context().services.storage.db;

  async function send(apiKey: string, body: Record<string, unknown>): Promise<string> {
    const response = await context().app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: bearer(apiKey),
      payload: { template: 'user_created', data: { user_name: 'Jane' }, ...body },
    });
    expect(response.statusCode, response.body).toBe(202);
    return response.json<{ request_id: string }>().request_id;
  }

  const status = (apiKey: string, requestId: string) => statusOf(context().app, apiKey, requestId);

  const settled = (apiKey: string, requestId: string) => settledStatus(context().app, apiKey, requestId);

  /** An endpoint of the project that calls the receiver, which verifies with its secret. */
  async function hook(projectId: number, r: Receiver, events?: readonly string[], url = r.url) {
    const { endpoint, secret } = await services().webhooks.create(projectId, {
      url,
      ...(events !== undefined && { events }),
    });
    r.secret = secret;
    return endpoint;
  }

  function deliveries(projectId: number, endpointId: number): Promise<WebhookDelivery[]> {
    return services().webhooks.deliveries(projectId, endpointId, { limit: 100 });
  }

  /** Waits until every delivery of the endpoint is finished (succeeded or failed), at least `count`. */
  function finished(projectId: number, endpointId: number, count = 1): Promise<WebhookDelivery[]> {
    return waitUntil(
      async () => {
        const rows = await deliveries(projectId, endpointId);
        return rows.length >= count && rows.every((d) => d.state === 'succeeded' || d.state === 'failed')
          ? rows
          : undefined;
      },
      { what: `${count} deliveries of endpoint ${endpointId} to finish` },
    );
  }

  async function metric(projectId: number, outcome: string): Promise<number> {
    const text = await services().metrics.render();
    for (const line of text.split('\n')) {
      const match = /^herald_webhook_deliveries_total\{([^}]*)\} (\S+)$/.exec(line);
      if (match === null) continue;
      const labels = Object.fromEntries(
        [...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!] as const),
      );
      if (labels.project_id === String(projectId) && labels.outcome === outcome) return Number(match[2]);
    }
    return 0;
  }

  return { services, db, send, status, settled, hook, deliveries, finished, metric };
}

const WEBHOOK_ID = /^msg_[A-Za-z0-9_-]{22}$/;

function expectVerified(hits: readonly Hit[]): void {
  for (const hit of hits) {
    expect(hit.verifyError, `delivery ${hit.n} must verify`).toBeNull();
    expect(hit.headers['content-type']).toMatch(/^application\/json\b/);
    expect(hit.id).toMatch(WEBHOOK_ID);
    expect(hit.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
    expect(hit.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  }
}

// ---------------------------------------------------------------------------------------------

describe('webhook events from mail delivery', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    stack = await startStack({
      HERALD_SMTP_URL: sink.url,
      HERALD_WEBHOOK_MAX_ATTEMPTS: '10',
      // Short enough for the hung receiver's test, long enough that a call to a receiver that
      // answers at once never times out on a busy machine (the other tests expect one attempt).
      HERALD_WEBHOOK_TIMEOUT_MS: '2000',
    });
  });
  afterAll(() => stack.stop());

  it('reports a sent message with exactly one signed notification.sent carrying its status body', async () => {
    const { projectId, apiKey, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    expect(endpoint.events).toBeNull();

    const requestId = await h.send(apiKey, { to: 'Jane Doe <jane@example.org>' });
    const body = await h.settled(apiKey, requestId);
    expect(body.status).toBe('sent');

    const [delivery] = await h.finished(projectId, endpoint.id);
    expect(await h.deliveries(projectId, endpoint.id)).toHaveLength(1);
    expect(delivery).toMatchObject({ state: 'succeeded', attempts: 1, type: 'notification.sent' });
    expect(r.hits).toHaveLength(1);
    expectVerified(r.hits);
    const hit = r.hits[0]!;
    expect(hit.id).toBe(delivery!.webhook_id);
    expect(hit.event).toEqual({
      type: 'notification.sent',
      timestamp: body.updated_at,
      data: { ...body, project: name },
    });
    expect(hit.event!.data).toMatchObject({ status: 'sent', request_id: requestId, transport: 'smtp' });
    // The bytes that arrived are the bytes that were signed and stored.
    const stored = await h
      .db()
      .selectFrom('webhook_events')
      .select(['payload', 'webhook_id', 'type', 'notification_id'])
      .where('webhook_id', '=', hit.id)
      .executeTakeFirstOrThrow();
    expect(stored).toMatchObject({ type: 'notification.sent', notification_id: body.id });
    expect(hit.raw.toString('utf8')).toBe(stored.payload);
  });

  it('reports a 4xx as notification.deferred, with last_error and next_attempt_at, then notification.sent', async () => {
    const { projectId, apiKey, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    sink.failNext = { count: 1, code: 451, message: '4.3.0 Try again later' };

    const requestId = await h.send(apiKey, { to: 'retry@example.org' });
    const body = await h.settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'sent', attempts: 2 });

    await h.finished(projectId, endpoint.id, 2);
    expect(r.hits).toHaveLength(2);
    expectVerified(r.hits);
    const [deferred] = r.of('notification.deferred');
    const [sent] = r.of('notification.sent');
    expect(deferred!.event!.data).toMatchObject({
      request_id: requestId,
      status: 'queued',
      attempts: 1,
      last_error: 'SMTP 451 4.3.0 Try again later',
      project: name,
    });
    const deferredData = deferred!.event!.data as Record<string, string>;
    expect(deferredData.next_attempt_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(deferredData.next_attempt_at!)).toBeGreaterThanOrEqual(
      Date.parse(deferredData.updated_at!),
    );
    expect(deferredData).not.toHaveProperty('sent_at');
    expect(deferredData).not.toHaveProperty('error_message');
    expect(sent!.event).toEqual({
      type: 'notification.sent',
      timestamp: body.updated_at,
      data: { ...body, project: name },
    });
    // One event per state change, each with an id of its own.
    expect(deferred!.id).not.toBe(sent!.id);
  });

  it('reports a 5xx as notification.failed with the reply', async () => {
    const { projectId, apiKey, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    sink.rejectRecipients.set('refused@example.org', [
      554,
      '5.7.1 <refused@example.org>: Relay access denied',
    ]);

    const requestId = await h.send(apiKey, { to: 'refused@example.org' });
    const body = await h.settled(apiKey, requestId);
    expect(body).toMatchObject({
      status: 'failed',
      error_message: 'SMTP 554 5.7.1 <refused@example.org>: Relay access denied',
    });
    await h.finished(projectId, endpoint.id);
    expect(r.hits).toHaveLength(1);
    expectVerified(r.hits);
    expect(r.hits[0]!.event).toEqual({
      type: 'notification.failed',
      timestamp: body.updated_at,
      data: { ...body, project: name },
    });
  });

  it('reports a cancel (DELETE) as notification.failed with error_message Canceled', async () => {
    const { projectId, apiKey, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    const requestId = await h.send(apiKey, {
      to: 'later@example.org',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const canceled = await stack.ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${requestId}`,
      headers: bearer(apiKey),
    });
    expect(canceled.statusCode, canceled.body).toBe(200);
    const body = await h.status(apiKey, requestId);
    expect(body).toMatchObject({ status: 'failed', error_message: 'Canceled' });

    await h.finished(projectId, endpoint.id);
    expect(r.hits).toHaveLength(1);
    expectVerified(r.hits);
    expect(r.hits[0]!.event).toEqual({
      type: 'notification.failed',
      timestamp: body.updated_at,
      data: { ...body, project: name },
    });
  });

  it("carries the send's metadata, Reply-To and file list in every event", async () => {
    const { projectId, apiKey, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    sink.failNext = { count: 1, code: 451, message: '4.3.0 Try again later' };
    const metadata = { order_id: 'o-77', customer: 'c-9' };
    const message = {
      metadata,
      reply_to: 'help@shop.example',
      attachments: [{ filename: 'receipt.pdf', content: Buffer.from('%PDF').toString('base64') }],
    };
    const requestId = await h.send(apiKey, { to: 'meta@example.org', ...message });
    const body = await h.settled(apiKey, requestId);
    const later = await h.send(apiKey, {
      to: 'meta@example.org',
      metadata: { order_id: 'o-78' },
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const canceled = await stack.ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${later}`,
      headers: bearer(apiKey),
    });
    expect(canceled.statusCode, canceled.body).toBe(200);

    await h.finished(projectId, endpoint.id, 3);
    expectVerified(r.hits);
    const files = [{ filename: 'receipt.pdf', content_type: 'application/pdf', size: 4 }];
    expect(body).toMatchObject({
      status: 'sent',
      metadata,
      reply_to: 'help@shop.example',
      attachments: files,
    });
    const [deferred] = r.of('notification.deferred');
    const [sent] = r.of('notification.sent');
    const [failed] = r.of('notification.failed');
    expect(deferred!.event!.data).toMatchObject({
      status: 'queued',
      metadata,
      attachments: files,
      project: name,
    });
    expect(sent!.event!.data).toEqual({ ...body, project: name });
    expect(failed!.event!.data).toMatchObject({
      request_id: later,
      error_message: 'Canceled',
      metadata: { order_id: 'o-78' },
    });
    expect(failed!.event!.data).not.toHaveProperty('attachments');
  });

  it('sends an endpoint only the events of its filter, and every endpoint the same event with one webhook-id', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const all = await receiver();
    const failedOnly = await receiver();
    const allEndpoint = await h.hook(projectId, all);
    const failedEndpoint = await h.hook(projectId, failedOnly, ['notification.failed']);
    expect(failedEndpoint.events).toEqual(['notification.failed']);
    // Naming every event is the same as no filter.
    const everything = await stack.ctx.services.webhooks.create(projectId, {
      url: all.url,
      events: [...NOTIFICATION_EVENTS],
    });
    expect(everything.endpoint.events).toBeNull();
    await stack.ctx.services.webhooks.delete(projectId, everything.endpoint.id);

    sink.rejectRecipients.set('blocked@example.org', [554, '5.7.1 Message refused']);
    const ok = await h.send(apiKey, { to: 'ok@example.org' });
    const bad = await h.send(apiKey, { to: 'blocked@example.org' });
    expect((await h.settled(apiKey, ok)).status).toBe('sent');
    expect((await h.settled(apiKey, bad)).status).toBe('failed');

    await h.finished(projectId, allEndpoint.id, 2);
    const onlyFailed = await h.finished(projectId, failedEndpoint.id, 1);
    // The filter is applied when the event is written: no delivery of the sent event exists.
    expect(onlyFailed.map((d) => d.type)).toEqual(['notification.failed']);
    expect(failedOnly.hits).toHaveLength(1);
    expect(all.hits).toHaveLength(2);
    expectVerified([...all.hits, ...failedOnly.hits]);
    expect(all.of('notification.sent')).toHaveLength(1);
    const failedAtAll = all.of('notification.failed');
    expect(failedAtAll).toHaveLength(1);
    expect(failedOnly.hits[0]!.event!.type).toBe('notification.failed');
    expect(failedOnly.hits[0]!.id).toBe(failedAtAll[0]!.id);
    expect(failedOnly.hits[0]!.raw.equals(failedAtAll[0]!.raw)).toBe(true);
    expect(failedOnly.hits[0]!.event!.data.request_id).toBe(bad);
    // Each endpoint signs with its own secret.
    expect(failedOnly.hits[0]!.headers['webhook-signature']).not.toBe(
      failedAtAll[0]!.headers['webhook-signature'],
    );
  });

  it('retries a 500 with the same webhook-id and keeps every attempt with its status, latency and a bounded excerpt', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    r.reply = (n) => (n === 1 ? { status: 500, body: 'E'.repeat(5000) } : { status: 200, body: 'ok' });
    const endpoint = await h.hook(projectId, r);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [delivery] = await h.finished(projectId, endpoint.id);

    expect(r.hits).toHaveLength(2);
    expectVerified(r.hits);
    expect(r.hits[1]!.id).toBe(r.hits[0]!.id);
    expect(r.hits[1]!.raw.equals(r.hits[0]!.raw)).toBe(true);
    expect(delivery).toMatchObject({
      state: 'succeeded',
      attempts: 2,
      last_status_code: 200,
      last_error: null,
    });
    expect(delivery!.attemptLog).toHaveLength(2);
    const [first, second] = delivery!.attemptLog;
    expect(first).toMatchObject({ attempt: 1, status_code: 500, error: null, excerpt: 'E'.repeat(1024) });
    expect(second).toMatchObject({ attempt: 2, status_code: 200, error: null, excerpt: 'ok' });
    for (const attempt of [first!, second!]) {
      expect(Number.isInteger(attempt.latency_ms)).toBe(true);
      expect(attempt.latency_ms).toBeGreaterThanOrEqual(0);
    }
    expect(Number(second!.started_at)).toBeGreaterThanOrEqual(Number(first!.started_at));

    expect(await h.metric(projectId, 'failure')).toBe(1);
    expect(await h.metric(projectId, 'success')).toBe(1);
    expect(await h.metric(projectId, 'timeout')).toBe(0);
  });

  it('retries while the receiver is down, and delivers once it is up', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const port = await closedPort();
    const r = new Receiver();
    const endpoint = await h.hook(projectId, r, undefined, `http://127.0.0.1:${port}/down`);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    await waitUntil(
      async () => {
        const [d] = await h.deliveries(projectId, endpoint.id);
        return d !== undefined && d.attemptLog.length > 0 ? d : undefined;
      },
      { what: 'a first attempt at the closed port' },
    );
    receivers.push(await r.start(port));
    const [delivery] = await h.finished(projectId, endpoint.id);
    expect(delivery!.state).toBe('succeeded');
    const log = delivery!.attemptLog;
    expect(log.length).toBeGreaterThanOrEqual(2);
    expect(log[0]).toMatchObject({
      attempt: 1,
      status_code: null,
      excerpt: null,
      error: 'Connection refused',
    });
    expect(log.at(-1)).toMatchObject({ status_code: 204, error: null });
    expect(r.hits).toHaveLength(1);
    expectVerified(r.hits);
    expect(r.hits[0]!.id).toBe(delivery!.webhook_id);
  });

  it('counts no answer within HERALD_WEBHOOK_TIMEOUT_MS as a failed attempt and retries', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    r.reply = (n) => (n === 1 ? 'hang' : 204);
    const endpoint = await h.hook(projectId, r);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [delivery] = await h.finished(projectId, endpoint.id);

    expect(delivery).toMatchObject({ state: 'succeeded', attempts: 2 });
    const [first, second] = delivery!.attemptLog;
    expect(first).toMatchObject({ attempt: 1, status_code: null, excerpt: null });
    expect(first!.error).toMatch(/^Timed out after 2000 ms/);
    expect(second).toMatchObject({ attempt: 2, status_code: 204, error: null });
    expect(r.hits).toHaveLength(2);
    expectVerified(r.hits);
    expect(r.hits[1]!.id).toBe(r.hits[0]!.id);
    // Herald gave up on the first call: the request it held open was closed.
    await waitUntil(() => (r.open === 0 ? true : undefined), { what: 'the hung request to be closed' });
    expect(await h.metric(projectId, 'timeout')).toBe(1);
    expect(await h.metric(projectId, 'success')).toBe(1);
  });

  it('counts a redirect as a failure and does not follow it', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const elsewhere = await receiver();
    const r = await receiver();
    r.reply = (n) => (n === 1 ? { status: 307, headers: { location: elsewhere.url }, body: 'moved' } : 204);
    const endpoint = await h.hook(projectId, r);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [delivery] = await h.finished(projectId, endpoint.id);
    expect(delivery!.attemptLog.map((a) => [a.status_code, a.error])).toEqual([
      [307, null],
      [204, null],
    ]);
    expect(delivery!.attemptLog[0]!.excerpt).toBe('moved');
    expect(r.hits).toHaveLength(2);
    expect(elsewhere.hits).toHaveLength(0);
    expect(elsewhere.connections).toBe(0);
    expect(await h.metric(projectId, 'failure')).toBe(1);
  });

  it('replays a delivery with the same webhook-id and a fresh signature', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const other = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    const otherEndpoint = await h.hook(other.projectId, await receiver());

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [first] = await h.finished(projectId, endpoint.id);
    expect(r.hits).toHaveLength(1);

    // Ids never cross endpoints or projects.
    await expect(stack.ctx.services.webhooks.replay(other.projectId, endpoint.id, first!.id)).rejects.toThrow(
      /Webhook endpoint not found/,
    );
    await expect(
      stack.ctx.services.webhooks.replay(other.projectId, otherEndpoint.id, first!.id),
    ).rejects.toThrow(/Webhook delivery not found/);

    const replayId = await stack.ctx.services.webhooks.replay(projectId, endpoint.id, first!.id);
    expect(replayId).not.toBe(first!.id);
    const rows = await h.finished(projectId, endpoint.id, 2);
    expect(rows.map((d) => [d.id, d.state, d.webhook_id])).toEqual([
      [replayId, 'succeeded', first!.webhook_id],
      [first!.id, 'succeeded', first!.webhook_id],
    ]);
    expect(r.hits).toHaveLength(2);
    expectVerified(r.hits);
    expect(r.hits[1]!.id).toBe(r.hits[0]!.id);
    expect(r.hits[1]!.raw.equals(r.hits[0]!.raw)).toBe(true);
  });

  it('sends a test event to that endpoint alone, whatever its filter', async () => {
    const { projectId, name } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const bystander = await receiver();
    const endpoint = await h.hook(projectId, r, ['notification.complained']);
    const other = await h.hook(projectId, bystander);

    await stack.ctx.services.webhooks.sendTest(projectId, endpoint.id);
    await h.finished(projectId, endpoint.id);
    expect(r.hits).toHaveLength(1);
    expectVerified(r.hits);
    expect(r.hits[0]!.event).toEqual({
      type: 'webhook.test',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown,
      data: { endpoint_id: endpoint.id, message: 'This is a test event from Herald.', project: name },
    });
    expect(await h.deliveries(projectId, other.id)).toHaveLength(0);
    expect(bystander.hits).toHaveLength(0);
  });

  it("puts a test event ahead of a failing endpoint's backlog: its next call is the test", async () => {
    const { projectId } = await seedProject(stack.ctx.services);
    const r = await receiver();
    // Everything fails but the test: a failing endpoint is called once per poll, oldest due first.
    r.reply = (_n, hit) => (hit.event?.type === 'webhook.test' ? 204 : 500);
    const endpoint = await h.hook(projectId, r);
    const hour = Date.now() - 3_600_000;
    await stack.ctx.services.storage.db.transaction().execute((tx) =>
      recordEvents(
        tx,
        Array.from({ length: 12 }, (_, i) => ({
          projectId,
          notificationId: null,
          type: 'notification.sent' as const,
          data: () => ({ n: i }),
          at: hour + i,
        })),
      ),
    );
    await r.waitForHits(2, 'the backlog to be failing');
    await stack.ctx.services.webhooks.sendTest(projectId, endpoint.id);
    const before = r.hits.length;
    const test = await waitUntil(() => r.hits.find((hit) => hit.event?.type === 'webhook.test'), {
      what: 'the test event',
    });
    // At most the call in flight when it was queued (one at a time to a failing endpoint) came between.
    expect(test.n - before).toBeLessThanOrEqual(2);
    const [queued] = (await h.deliveries(projectId, endpoint.id)).filter((d) => d.type === 'webhook.test');
    // It is shown due when the backlog's first was, not at some time before.
    expect(Number(queued!.run_at)).toBeGreaterThanOrEqual(hour - 1);
  });

  it('keeps one untried test event at a time, so repeated tests never hold the backlog back', async () => {
    const { projectId } = await seedProject(stack.ctx.services);
    const r = await receiver();
    // The backlog fails throughout; the first test call fails, later ones succeed.
    r.reply = (_n, hit) =>
      hit.event?.type === 'webhook.test' && r.of('webhook.test').length > 1 ? 204 : 500;
    const endpoint = await h.hook(projectId, r);
    const sendTest = () => stack.ctx.services.webhooks.sendTest(projectId, endpoint.id);
    const tests = async () =>
      (await h.deliveries(projectId, endpoint.id)).filter((d) => d.type === 'webhook.test');
    // The endpoint's one call in flight is held, so whatever is queued now stays pending.
    const releaseBacklog = r.holdAnswers();
    await stack.ctx.services.storage.db.transaction().execute((tx) =>
      recordEvents(
        tx,
        Array.from({ length: 6 }, (_, i) => ({
          projectId,
          notificationId: null,
          type: 'notification.sent' as const,
          data: () => ({ n: i }),
          at: Date.now() - 60_000 + i,
        })),
      ),
    );
    await r.waitForHits(1, 'a backlog call to be held');
    expect(await sendTest()).toBe(true);
    // Queued and never tried.
    expect(await sendTest()).toBe(false);
    expect(await tests()).toHaveLength(1);

    // The held call is answered; the endpoint's next call is the test's, held in turn.
    const releaseTest = r.holdAnswers();
    releaseBacklog();
    await waitUntil(() => r.of('webhook.test')[0], { what: 'the test call' });
    // On its first call.
    expect(await sendTest()).toBe(false);
    expect(await tests()).toHaveLength(1);

    // Once it has been answered, the next test is queued. A test is tried once: a failed one is
    // final, not retried for as long as a real event.
    releaseTest();
    const failed = await waitUntil(
      async () => {
        const [test] = await tests();
        return test?.state === 'failed' ? test : undefined;
      },
      { what: 'the test to fail' },
    );
    expect(failed).toMatchObject({ attempts: 1, last_status_code: 500 });
    expect(await sendTest()).toBe(true);
    await waitUntil(async () => ((await tests()).some((d) => d.state === 'succeeded') ? true : undefined), {
      what: 'the second test to succeed',
    });
    expect((await tests()).map((d) => d.state).sort()).toEqual(['failed', 'succeeded']);
    expect(r.of('webhook.test')).toHaveLength(2);
  });

  it('gives a disabled endpoint nothing new and resumes its pending deliveries when it is enabled', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    let answer = 500;
    r.reply = () => answer;
    const endpoint = await h.hook(projectId, r);
    const witness = await receiver();
    const witnessEndpoint = await h.hook(projectId, witness);

    const first = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, first)).status).toBe('sent');
    await r.waitForHits(1);
    const disabled = await stack.ctx.services.webhooks.setEnabled(projectId, endpoint.id, false);
    expect(disabled.enabled).toBe(false);
    // A call already made when it was disabled finishes; then the delivery waits, pending.
    const waiting = await waitUntil(
      async () => {
        const [d] = await h.deliveries(projectId, endpoint.id);
        return d?.state === 'pending' ? d : undefined;
      },
      { what: 'the failed delivery to be pending again' },
    );
    const callsWhenDisabled = r.hits.length;
    answer = 204;
    // Nothing can be queued for it by hand either: it would only wait unseen.
    await expect(stack.ctx.services.webhooks.sendTest(projectId, endpoint.id)).rejects.toThrow(
      'The endpoint is disabled; enable it first',
    );
    await expect(stack.ctx.services.webhooks.replay(projectId, endpoint.id, waiting.id)).rejects.toThrow(
      'The endpoint is disabled; enable it first',
    );

    // An event while disabled makes no delivery for it.
    const second = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, second)).status).toBe('sent');
    expect(await h.deliveries(projectId, endpoint.id)).toHaveLength(1);

    // Once the pending delivery is due, an event after that time still reaches the other endpoint,
    // and the disabled one's delivery was not even claimed.
    await waitUntil(() => (Date.now() > Number(waiting.run_at) ? true : undefined), {
      what: 'the pending delivery to be due',
    });
    const third = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, third)).status).toBe('sent');
    await h.finished(projectId, witnessEndpoint.id, 3);
    const [still] = await h.deliveries(projectId, endpoint.id);
    expect(still).toMatchObject({ state: 'pending', attempts: waiting.attempts });
    expect(r.hits).toHaveLength(callsWhenDisabled);

    await stack.ctx.services.webhooks.setEnabled(projectId, endpoint.id, true);
    const [done] = await h.finished(projectId, endpoint.id);
    expect(done).toMatchObject({ state: 'succeeded', last_status_code: 204, webhook_id: waiting.webhook_id });
    expect(await h.deliveries(projectId, endpoint.id)).toHaveLength(1);
    expect(r.hits.at(-1)!.id).toBe(waiting.webhook_id);
    expect(r.hits.at(-1)!.event!.data.request_id).toBe(first);
    expectVerified(r.hits);
  });

  it('deletes an endpoint with its deliveries and attempts, only within its project', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const other = await seedProject(stack.ctx.services);
    const r = await receiver();
    r.reply = () => 500;
    const endpoint = await h.hook(projectId, r);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [delivery] = await waitUntil(
      async () => {
        const rows = await h.deliveries(projectId, endpoint.id);
        return rows[0] !== undefined && rows[0].attemptLog.length > 0 ? rows : undefined;
      },
      { what: 'a failed attempt to be recorded' },
    );

    await expect(stack.ctx.services.webhooks.delete(other.projectId, endpoint.id)).rejects.toThrow(
      /Webhook endpoint not found/,
    );
    expect((await stack.ctx.services.webhooks.list(projectId)).map((e) => e.id)).toEqual([endpoint.id]);

    await stack.ctx.services.webhooks.delete(projectId, endpoint.id);
    expect(await stack.ctx.services.webhooks.list(projectId)).toEqual([]);
    await expect(stack.ctx.services.webhooks.get(projectId, endpoint.id)).rejects.toThrow(
      /Webhook endpoint not found/,
    );
    const left = async () => {
      const deliveries = await h
        .db()
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', endpoint.id)
        .execute();
      const attempts = await h
        .db()
        .selectFrom('webhook_attempts')
        .select('id')
        .where('delivery_id', '=', delivery!.id)
        .execute();
      return { deliveries: deliveries.length, attempts: attempts.length };
    };
    expect(await left()).toEqual({ deliveries: 0, attempts: 0 });
    // A call in flight at the delete does not bring anything back.
    const witness = await receiver();
    const witnessEndpoint = await h.hook(projectId, witness);
    const later = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, later)).status).toBe('sent');
    await h.finished(projectId, witnessEndpoint.id);
    expect(await left()).toEqual({ deliveries: 0, attempts: 0 });
  });
});

describe('a delivery that never succeeds', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    stack = await startStack({ HERALD_SMTP_URL: sink.url, HERALD_WEBHOOK_MAX_ATTEMPTS: '3' });
  });
  afterAll(() => stack.stop());

  it('is marked failed after HERALD_WEBHOOK_MAX_ATTEMPTS attempts, and no call follows', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    r.reply = () => ({ status: 500, body: 'down for maintenance' });
    const endpoint = await h.hook(projectId, r);

    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const [delivery] = await h.finished(projectId, endpoint.id);
    expect(delivery).toMatchObject({ state: 'failed', attempts: 3, last_status_code: 500 });
    expect(delivery!.attemptLog.map((a) => [a.attempt, a.status_code, a.excerpt])).toEqual([
      [1, 500, 'down for maintenance'],
      [2, 500, 'down for maintenance'],
      [3, 500, 'down for maintenance'],
    ]);
    expect(r.hits).toHaveLength(3);
    expectVerified(r.hits);
    expect(new Set(r.hits.map((hit) => hit.id)).size).toBe(1);

    // Another project's event goes out after that; the failed delivery is not tried again.
    const other = await seedProject(stack.ctx.services);
    const witness = await receiver();
    const witnessEndpoint = await h.hook(other.projectId, witness);
    const later = await h.send(other.apiKey, { to: 'jane@example.org' });
    expect((await h.settled(other.apiKey, later)).status).toBe('sent');
    await h.finished(other.projectId, witnessEndpoint.id);
    expect(witness.hits).toHaveLength(1);
    expect(r.hits).toHaveLength(3);
    expect((await h.deliveries(projectId, endpoint.id))[0]).toMatchObject({ state: 'failed', attempts: 3 });
    expect(await h.metric(projectId, 'failure')).toBe(3);
    expect(await h.metric(projectId, 'success')).toBe(0);
    expect(await h.metric(other.projectId, 'success')).toBe(1);
  });
});

describe('an endpoint with a backlog', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    // The poll is far beyond the test's waits: only a freed lane can start the backlog's calls.
    stack = await startStack({
      HERALD_SMTP_URL: sink.url,
      HERALD_DELIVERY_POLL_MS: '60000',
      HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: '1',
    });
  });
  afterAll(() => stack.stop());

  it('is called again as each call ends, not at the next poll', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const answer = r.holdAnswers();
    const endpoint = await h.hook(projectId, r);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await h.send(apiKey, { to: `backlog${i}@example.org` }));
    for (const id of ids) expect((await h.settled(apiKey, id)).status).toBe('sent');
    // Every event is queued while the first call holds the endpoint's only lane.
    await r.waitForHits(1);
    expect(r.open).toBe(1);
    answer();

    const rows = await h.finished(projectId, endpoint.id, 5);
    expect(rows.map((d) => d.state)).toEqual(Array(5).fill('succeeded'));
    expect(r.hits).toHaveLength(5);
    expect(r.maxOpen).toBe(1);
  });

  it('is called once per poll while its calls fail, whatever else frees a lane meanwhile', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const healthy = await receiver();
    const answer = healthy.holdAnswers();
    await h.hook(projectId, healthy);
    const failing = await receiver();
    failing.reply = () => 500;
    await h.hook(projectId, failing);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await h.send(apiKey, { to: `probe${i}@example.org` }));
    for (const id of ids) expect((await h.settled(apiKey, id)).status).toBe('sent');
    await failing.waitForHits(1);
    answer();

    // The healthy endpoint's backlog drains, each of its calls freeing a lane of the project.
    await healthy.waitForHits(6);
    expect(failing.hits).toHaveLength(1);
  });
});

describe('events recorded outside delivery', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    // The poll is far beyond the test's waits: only a wake can start these calls in time.
    stack = await startStack({
      HERALD_SMTP_URL: sink.url,
      HERALD_DELIVERY_POLL_MS: '60000',
      HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: '1',
    });
  });
  afterAll(() => stack.stop());

  /** A sent message of a project whose only endpoint wants `events`, none of them `sent`. */
  async function sentWithEndpoint(events: readonly string[]) {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r, events);
    const requestId = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, requestId)).status).toBe('sent');
    const row = await findNotification(h.db(), requestId);
    return { projectId, apiKey, requestId, id: row!.id, r, endpoint };
  }

  it('does not look for deliveries after outcomes that queued none', async () => {
    const { apiKey } = await seedProject(stack.ctx.services);
    const looks = vi.spyOn(stack.worker.webhooks, 'fill');
    try {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await h.send(apiKey, { to: `quiet${i}@example.org` }));
      for (const id of ids) expect((await h.settled(apiKey, id)).status).toBe('sent');
      expect(looks).not.toHaveBeenCalled();
    } finally {
      looks.mockRestore();
    }
  });

  it('calls the endpoint for a cancel at once, not at the next poll', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const endpoint = await h.hook(projectId, r);
    const requestId = await h.send(apiKey, {
      to: 'later@example.org',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const canceled = await stack.ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${requestId}`,
      headers: bearer(apiKey),
    });
    expect(canceled.statusCode, canceled.body).toBe(200);
    const [hit] = await r.waitForHits(1, "the cancel's event");
    expect(hit!.event?.type).toBe('notification.failed');
    expect(await h.finished(projectId, endpoint.id)).toHaveLength(1);
  });

  it('calls an endpoint enabled again at once for what waited, not at the next poll', async () => {
    const { projectId, apiKey } = await seedProject(stack.ctx.services);
    const r = await receiver();
    const answer = r.holdAnswers();
    const endpoint = await h.hook(projectId, r);
    const first = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, first)).status).toBe('sent');
    await r.waitForHits(1);
    // The second event waits for the endpoint's only lane, held by the first call.
    const second = await h.send(apiKey, { to: 'jane@example.org' });
    expect((await h.settled(apiKey, second)).status).toBe('sent');
    await h.services().webhooks.setEnabled(projectId, endpoint.id, false);
    answer();
    await waitUntil(
      async () => {
        const states = (await h.deliveries(projectId, endpoint.id)).map((d) => d.state);
        return states.join() === 'pending,succeeded' ? true : undefined;
      },
      { what: 'the first call done and the second delivery waiting' },
    );
    expect(r.hits).toHaveLength(1);

    await h.services().webhooks.setEnabled(projectId, endpoint.id, true);
    await r.waitForHits(2, 'the waiting delivery, once enabled');
  });

  it('calls the endpoint for a bounce at once, not at the next poll', async () => {
    const { id, requestId, r } = await sentWithEndpoint(['notification.bounced']);
    const recipient: BounceRecipient = {
      recipient: 'jane@example.org',
      action: 'failed',
      status: '5.1.1',
      diagnostic: '550 5.1.1 <jane@example.org>: user unknown',
      category: 'user_unknown',
      type: 'hard',
      replyCode: 550,
    };
    const report = { kind: 'bounce', recipients: [recipient], originalMessageId: null } as const;
    expect(await h.services().bounces.apply({ kind: 'token', id }, report)).toMatchObject({
      outcome: 'bounced',
      requestId,
    });
    const [hit] = await r.waitForHits(1, "the bounce's event");
    expect(hit!.event?.type).toBe('notification.bounced');
  });

  it('calls the endpoint for a complaint at once, not at the next poll', async () => {
    const { id, requestId, r } = await sentWithEndpoint(['notification.complained']);
    const report = {
      kind: 'complaint',
      feedbackType: 'abuse',
      recipient: 'jane@example.org',
      originalMessageId: null,
    } as const;
    expect(await h.services().bounces.apply({ kind: 'token', id }, report)).toMatchObject({
      outcome: 'complained',
      requestId,
    });
    const [hit] = await r.waitForHits(1, "the complaint's event");
    expect(hit!.event?.type).toBe('notification.complained');
  });
});

describe('isolation', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    stack = await startStack({
      HERALD_SMTP_URL: sink.url,
      HERALD_WEBHOOK_TIMEOUT_MS: '2000',
      HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: '2',
    });
  });
  afterAll(() => stack.stop());

  it("delivers project B's events and mail while project A's endpoint hangs", async () => {
    const a = await seedProject(stack.ctx.services);
    const b = await seedProject(stack.ctx.services);
    const hanging = await receiver();
    hanging.reply = () => 'hang';
    await h.hook(a.projectId, hanging);
    const fine = await receiver();
    const bEndpoint = await h.hook(b.projectId, fine);

    // A has many events queued for an endpoint that never answers.
    const aIds: string[] = [];
    for (let i = 0; i < 12; i++) aIds.push(await h.send(a.apiKey, { to: `a${i}@example.org` }));
    for (const id of aIds) expect((await h.settled(a.apiKey, id)).status).toBe('sent');
    await waitUntil(() => (hanging.open >= 2 ? true : undefined), {
      what: "A's endpoint to hold two calls open",
    });

    let aOpenWhenBArrived = -1;
    fine.onHit = () => (aOpenWhenBArrived = hanging.open);
    const sinkBefore = sink.messages.length;
    const bId = await h.send(b.apiKey, { to: 'b@example.org' });
    // B's mail is sent while A's calls hang.
    const { body: bStatus, aOpen } = await waitUntil(
      async () => {
        const body = await h.status(b.apiKey, bId);
        return body.status === 'queued' ? undefined : { body, aOpen: hanging.open };
      },
      { what: "B's message to be sent" },
    );
    expect(bStatus.status).toBe('sent');
    expect(aOpen).toBeGreaterThan(0);
    expect(
      sink.messages.slice(sinkBefore).some((m) => m.parsed.headers.get('x-herald-request-id') === bId),
    ).toBe(true);

    // B's event arrives while A's receiver still holds requests open.
    const [bDelivery] = await h.finished(b.projectId, bEndpoint.id);
    expect(bDelivery).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect(fine.hits).toHaveLength(1);
    expectVerified(fine.hits);
    expect(fine.hits[0]!.event!.data.request_id).toBe(bId);
    expect(aOpenWhenBArrived).toBeGreaterThan(0);
    // A's endpoint never held more than its share of lanes.
    expect(hanging.maxOpen).toBeLessThanOrEqual(2);
  });
});

describe('isolation between projects', () => {
  let stack: Stack;
  const h = helpers(() => stack.ctx);

  beforeAll(async () => {
    stack = await startStack({
      HERALD_SMTP_URL: sink.url,
      // Eight lanes: a project may hold at most four of them, and two are kept in reserve.
      HERALD_WEBHOOK_CONCURRENCY: '8',
      HERALD_WEBHOOK_TIMEOUT_MS: '5000',
    });
  });
  afterAll(() => stack.stop());

  it("keeps lanes for project B while project A's many endpoints all hang", async () => {
    const a = await seedProject(stack.ctx.services);
    const b = await seedProject(stack.ctx.services);
    const hanging: Receiver[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await receiver();
      r.reply = () => 'hang';
      await h.hook(a.projectId, r);
      hanging.push(r);
    }
    let aOpen = 0;
    let aMaxOpen = 0;
    for (const r of hanging) {
      r.onHit = () => {
        aOpen = hanging.reduce((n, x) => n + x.open, 0);
        aMaxOpen = Math.max(aMaxOpen, aOpen);
      };
    }
    const fine = await receiver();
    const bEndpoint = await h.hook(b.projectId, fine);

    // Two events of A for each of its eight endpoints: sixteen calls waiting, each one that starts hangs.
    for (let i = 0; i < 2; i++) {
      const id = await h.send(a.apiKey, { to: `a${i}@example.org` });
      expect((await h.settled(a.apiKey, id)).status).toBe('sent');
    }
    await waitUntil(() => (hanging.reduce((n, r) => n + r.open, 0) >= 4 ? true : undefined), {
      what: "A's endpoints to hold four calls open",
    });

    let atArrival: { open: number; abandoned: number } | null = null;
    fine.onHit = () =>
      (atArrival = {
        open: hanging.reduce((n, r) => n + r.open, 0),
        abandoned: hanging.reduce((n, r) => n + r.abandoned, 0),
      });
    const bId = await h.send(b.apiKey, { to: 'b@example.org' });
    expect((await h.settled(b.apiKey, bId)).status).toBe('sent');
    const [bDelivery] = await h.finished(b.projectId, bEndpoint.id);
    expect(bDelivery).toMatchObject({ state: 'succeeded', attempts: 1 });
    expectVerified(fine.hits);
    // B's event did not wait for a lane of A's to time out: A still held its calls, none given up.
    expect(atArrival).toEqual({ open: 4, abandoned: 0 });
    // A never held more than its half of the lanes.
    expect(aMaxOpen).toBe(4);
  });
});

describe('outbound rules for webhook URLs', () => {
  let ctx: TestContext;
  let dispatcher: Worker | null = null;

  /** A worker whose webhook calls follow these outbound rules instead of the configured ones. */
  function startDispatcher(outbound: OutboundPolicy): Worker {
    const worker = createWorker(ctx.services, { outbound });
    worker.start();
    return (dispatcher = worker);
  }

  beforeAll(async () => {
    // No worker but the ones built here: the events are test events, delivered under their rules.
    ctx = await createTestContext({
      HERALD_STOP_TIMEOUT_MS: '5000',
      HERALD_DELIVERY_POLL_MS: '20',
      HERALD_WEBHOOK_MAX_ATTEMPTS: '1',
      HERALD_WEBHOOK_RETRY_BASE_MS: '50',
      HERALD_WEBHOOK_TIMEOUT_MS: '2000',
      HERALD_WEBHOOK_CONCURRENCY: '4',
      HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: '2',
    });
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await stopReceivers();
    await ctx.close();
  });

  it('refuses a loopback receiver under enforced rules and reaches it once HERALD_OUTBOUND_ALLOW lists it', async () => {
    const { projectId } = await seedProject(ctx.services);
    const byAddress = await receiver();
    const byName = await receiver();
    const h = helpers(() => ctx);
    const literal = await h.hook(projectId, byAddress);
    const named = await h.hook(projectId, byName, undefined, `http://localhost:${byName.port}/hooks/herald`);

    startDispatcher({ enforce: true, allow: [] });
    await ctx.services.webhooks.sendTest(projectId, literal.id);
    await ctx.services.webhooks.sendTest(projectId, named.id);
    const [refusedLiteral] = await h.finished(projectId, literal.id);
    const [refusedNamed] = await h.finished(projectId, named.id);
    for (const refused of [refusedLiteral!, refusedNamed!]) {
      expect(refused).toMatchObject({ state: 'failed', attempts: 1, last_status_code: null });
      expect(refused.attemptLog).toHaveLength(1);
      expect(refused.attemptLog[0]).toMatchObject({ status_code: null, excerpt: null });
      expect(refused.attemptLog[0]!.error).toMatch(/^Host is not allowed/);
    }
    expect(byAddress.connections).toBe(0);
    expect(byName.connections).toBe(0);
    await dispatcher!.stop();

    startDispatcher({ enforce: true, allow: parseOutboundAllow('127.0.0.1') });
    await ctx.services.webhooks.replay(projectId, literal.id, refusedLiteral!.id);
    await ctx.services.webhooks.replay(projectId, named.id, refusedNamed!.id);
    const [allowedLiteral] = await h.finished(projectId, literal.id, 2);
    const [allowedNamed] = await h.finished(projectId, named.id, 2);
    for (const allowed of [allowedLiteral!, allowedNamed!])
      expect(allowed).toMatchObject({ state: 'succeeded', last_status_code: 204 });
    expect(byAddress.hits).toHaveLength(1);
    expect(byName.hits).toHaveLength(1);
    expectVerified([...byAddress.hits, ...byName.hits]);
    expect(byAddress.hits[0]!.id).toBe(refusedLiteral!.webhook_id);
    expect(byAddress.hits[0]!.event!.type).toBe('webhook.test');
  });
});
