import { once } from 'node:events';
import http from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { ProcessGroup, httpRequest, requestIdOf } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The webhook outbox survives `kill -9` (product.md §5, §8): a real `herald serve` in capture mode
 * is SIGKILLed while a webhook call is in flight, or right after answering 202 and before any call
 * was made; after a restart the event reaches the receiver, with the same `webhook-id` and a
 * signature the Standard Webhooks library accepts, and the outbox holds it exactly once.
 */

/**
 * A call in flight stays in flight until the process dies: its deadline (and so its lease, which
 * is the deadline plus a minute) is far longer than any wait below, so a killed process's calls
 * can only come back through its stopped heartbeat.
 */
const WEBHOOK_TIMEOUT_MS = 60_000;
/** Well under the lease of a killed call (WEBHOOK_TIMEOUT_MS + 60 s). */
const REDELIVERY_WITHIN_MS = 30_000;

let database: TestDatabase;
let services: Services;
let env: Record<string, string>;
const group = new ProcessGroup();

interface Arrival {
  readonly id: string;
  readonly type: string;
  readonly requestId: string | undefined;
  readonly raw: string;
  readonly verified: boolean;
  answered: number | null;
}

/**
 * A webhook receiver in the test: verifies every delivery with `standardwebhooks`, and either holds
 * requests open without answering (`hold`) or answers 200 at once.
 */
class Receiver {
  readonly arrivals: Arrival[] = [];
  private readonly held: http.ServerResponse[] = [];
  private readonly server: http.Server;
  /** Set once the endpoint exists: its secret is known only then. */
  verifier: Webhook | null = null;
  hold = false;

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let verified = true;
        try {
          this.verifier!.verify(raw, req.headers as Record<string, string>);
        } catch {
          verified = false;
        }
        const body = JSON.parse(raw) as { type: string; data: { request_id?: string } };
        const arrival: Arrival = {
          id: String(req.headers['webhook-id']),
          type: body.type,
          requestId: body.data.request_id,
          raw,
          verified,
          answered: null,
        };
        this.arrivals.push(arrival);
        if (!verified) {
          arrival.answered = 400;
          res.writeHead(400).end();
        } else if (this.hold) {
          this.held.push(res);
        } else {
          arrival.answered = 200;
          res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        }
      });
    });
    // A killed Herald resets the connections it held.
    this.server.on('clientError', (_error, socket) => socket.destroy());
  }

  async listen(port = 0): Promise<number> {
    this.server.listen(port, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as AddressInfo).port;
  }

  /** Answers every request from now on; the requests held so far are dropped unanswered. */
  answerFromNowOn(): void {
    this.hold = false;
    for (const res of this.held.splice(0)) res.destroy();
  }

  close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A project without SMTP settings (capture mode) and one webhook endpoint for every event. */
async function newProject(
  name: string,
  url: string,
): Promise<{ id: number; apiKey: string; secret: string }> {
  const { project, apiKey } = await services.projects.create({ name, fromEmail: 'noreply@crash.example' });
  await services.templates.create(project.id, {
    name: 'welcome',
    subject: 'Hi {{n}}',
    text: 'Message {{n}}',
  });
  const { secret } = await services.webhooks.create(project.id, { url });
  return { id: project.id, apiKey, secret };
}

async function send(url: string, apiKey: string): Promise<string> {
  const reply = await httpRequest(`${url}/api/v1/notifications`, {
    headers: { authorization: `Bearer ${apiKey}` },
    body: { template: 'welcome', to: 'jane@example.org', data: { n: '1' } },
  });
  expect(reply.status).toBe(202);
  return requestIdOf(reply);
}

async function notificationState(requestId: string): Promise<string> {
  const row = await services.storage.db
    .selectFrom('notifications')
    .select('state')
    .where('request_id', '=', requestId)
    .executeTakeFirstOrThrow();
  return row.state;
}

async function outbox(projectId: number) {
  const events = await services.storage.db
    .selectFrom('webhook_events')
    .select(['id', 'webhook_id', 'type', 'payload'])
    .where('project_id', '=', projectId)
    .execute();
  const deliveries = await services.storage.db
    .selectFrom('webhook_deliveries')
    .select(['id', 'event_id', 'state', 'attempts', 'last_status_code'])
    .where('project_id', '=', projectId)
    .execute();
  return { events, deliveries };
}

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database, {
    HERALD_LOG_LEVEL: 'info',
    HERALD_DELIVERY_POLL_MS: '50',
    HERALD_WEBHOOK_RETRY_BASE_MS: '200',
    HERALD_WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
  });
  services = await openServices(loadConfig(env), createLogger('silent'));
});

// A test that fails midway must not leave a server behind to deliver the next test's events.
afterEach(() => group.killAll());

afterAll(async () => {
  await group.killAll();
  await closeServices(services);
  await database.drop();
});

describe('webhook deliveries across kill -9', () => {
  it(
    'a call in flight when Herald is killed is made again after the restart, with the same webhook-id',
    { timeout: 120_000 },
    async () => {
      const hooks = new Receiver();
      const port = await hooks.listen();
      const project = await newProject('in-flight', `http://127.0.0.1:${port}/hooks`);
      hooks.verifier = new Webhook(project.secret);
      try {
        hooks.hold = true;
        const first = await group.http('first', 'all', env);
        const requestId = await send(first.url, project.apiKey);
        // The receiver has the call in hand: the notification's state change and its event are
        // committed, and the call is in flight.
        const inFlight = await waitUntil(() => hooks.arrivals[0], {
          what: 'the first webhook call to reach the receiver',
        });
        expect(inFlight).toMatchObject({
          type: 'notification.sent',
          requestId,
          verified: true,
          answered: null,
        });
        expect(inFlight.id).toMatch(/^msg_/);
        expect(await notificationState(requestId)).toBe('sent');
        const before = await outbox(project.id);
        expect(before.events).toHaveLength(1);
        expect(before.deliveries).toMatchObject([{ state: 'sending' }]);

        first.proc.kill('SIGKILL');
        expect(await first.proc.exited).toBeNull();
        hooks.answerFromNowOn();

        const second = await group.http('second', 'all', env);
        const restartedAt = Date.now();
        await waitUntil(
          async () => ((await outbox(project.id)).deliveries[0]?.state === 'succeeded' ? true : undefined),
          { timeoutMs: REDELIVERY_WITHIN_MS, what: 'the delivery to succeed after the restart' },
        );
        console.info(
          `crash-webhooks: in-flight call made again ${Date.now() - restartedAt} ms after the restart`,
        );

        // The same event again: the same webhook-id and body, signed afresh, accepted this time.
        expect(hooks.arrivals).toHaveLength(2);
        const again = hooks.arrivals[1]!;
        expect(again).toMatchObject({
          id: inFlight.id,
          type: 'notification.sent',
          verified: true,
          answered: 200,
        });
        expect(again.raw).toBe(inFlight.raw);

        const after = await outbox(project.id);
        expect(after.events).toHaveLength(1);
        expect(after.events[0]!.webhook_id).toBe(inFlight.id);
        expect(after.deliveries).toHaveLength(1);
        expect(after.deliveries[0]).toMatchObject({ state: 'succeeded', last_status_code: 200 });
        // The killed call counted as an attempt (it may have reached the receiver); only the one
        // that finished has a recorded outcome.
        expect(after.deliveries[0]!.attempts).toBe(2);
        const attempts = await services.storage.db
          .selectFrom('webhook_attempts')
          .select(['status_code'])
          .where('delivery_id', '=', after.deliveries[0]!.id)
          .execute();
        expect(attempts).toEqual([{ status_code: 200 }]);
        expect(await notificationState(requestId)).toBe('sent');

        second.proc.kill('SIGTERM');
        expect(await second.proc.exited).toBe(0);
      } finally {
        await hooks.close();
      }
    },
  );

  it.each([
    ['at once', 'killed-at-once', false],
    // The event is committed and its calls so far were refused: the outbox row alone carries it.
    ['once the event is in the outbox', 'killed-with-event', true],
  ])(
    'an event whose call never got through (killed %s after the 202, receiver down) is delivered after the restart',
    { timeout: 120_000 },
    async (_when, name: string, waitForEvent: boolean) => {
      // Nothing listens on the endpoint's port until the restart: any call before the kill fails.
      const port = await freePort();
      const project = await newProject(name, `http://127.0.0.1:${port}/hooks`);
      const first = await group.http('first', 'all', env);
      const requestId = await send(first.url, project.apiKey);
      if (waitForEvent)
        await waitUntil(async () => ((await outbox(project.id)).deliveries.length > 0 ? true : undefined), {
          what: 'the event and its delivery to be committed',
        });
      first.proc.kill('SIGKILL');
      expect(await first.proc.exited).toBeNull();
      const atKill = await outbox(project.id);
      console.info(
        `crash-webhooks: killed after the 202 with the notification ${await notificationState(requestId)}, ` +
          `${atKill.events.length} event(s), deliveries ${JSON.stringify(atKill.deliveries.map((d) => d.state))}`,
      );
      expect(atKill.events.length).toBeLessThanOrEqual(1);

      const hooks = new Receiver();
      hooks.verifier = new Webhook(project.secret);
      await hooks.listen(port);
      try {
        const second = await group.http('second', 'all', env);
        await waitUntil(
          async () => ((await outbox(project.id)).deliveries[0]?.state === 'succeeded' ? true : undefined),
          { timeoutMs: REDELIVERY_WITHIN_MS, what: 'the event to be delivered after the restart' },
        );
        expect(await notificationState(requestId)).toBe('sent');
        const after = await outbox(project.id);
        expect(after.events).toHaveLength(1);
        expect(after.events[0]).toMatchObject({ type: 'notification.sent' });
        expect(after.deliveries).toHaveLength(1);
        expect(after.deliveries[0]).toMatchObject({ state: 'succeeded', last_status_code: 200 });
        // Exactly one call reached the receiver: nothing was in flight at the kill.
        expect(hooks.arrivals).toHaveLength(1);
        expect(hooks.arrivals[0]).toMatchObject({
          id: after.events[0]!.webhook_id,
          type: 'notification.sent',
          requestId,
          verified: true,
          answered: 200,
        });
        expect(JSON.parse(hooks.arrivals[0]!.raw)).toMatchObject({
          type: 'notification.sent',
          data: { request_id: requestId, status: 'sent', transport: 'capture', project: name },
        });

        second.proc.kill('SIGTERM');
        expect(await second.proc.exited).toBe(0);
      } finally {
        await hooks.close();
      }
    },
  );
});
