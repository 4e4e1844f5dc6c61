import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/roles.js';
import type { Worker } from '../../src/roles.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The per-relay window against real SMTP servers (domain/relay-window.ts): a relay that answers
 * slowly but takes everything gets ever more transactions at once, up to HERALD_SMTP_MAX_CONNECTIONS;
 * a relay that refuses connections past a limit with `421 4.7.0` is soon sent at its limit, not
 * past it, and every message still arrives.
 */

/** An SMTP server that takes `holdMs` per message and refuses connections past `limit` open ones. */
class ThrottlingRelay {
  open = 0;
  refused = 0;
  accepted = 0;
  inFlight = 0;
  peakInFlight = 0;
  port = 0;
  private readonly admitted = new Set<string>();
  private readonly server: SMTPServer;

  constructor(
    private readonly holdMs: number,
    private readonly limit = Infinity,
  ) {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onConnect: (session, callback) => {
        if (this.open >= this.limit) {
          this.refused++;
          callback(Object.assign(new Error('4.7.0 Too many connections, slow down'), { responseCode: 421 }));
          return;
        }
        this.open++;
        this.admitted.add(session.id);
        callback();
      },
      onClose: (session) => {
        // Refused connections were never counted as open.
        if (this.admitted.delete(session.id)) this.open--;
      },
      onMailFrom: (_address, _session, callback) => {
        this.inFlight++;
        this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
        callback();
      },
      onData: (stream, _session, callback) => {
        stream.resume();
        stream.on('end', () =>
          setTimeout(() => {
            this.inFlight--;
            this.accepted++;
            callback(null);
          }, this.holdMs),
        );
      },
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let ctx: TestContext | null = null;
let worker: Worker | null = null;
let relay: ThrottlingRelay | null = null;

afterEach(async () => {
  await worker?.stop();
  await ctx?.close();
  await relay?.stop();
  worker = null;
  ctx = null;
  relay = null;
});

async function sendThrough(
  target: ThrottlingRelay,
  count: number,
  env: Record<string, string>,
): Promise<{ ids: string[]; apiKey: string }> {
  ctx = await createTestContext({ HERALD_DELIVERY_POLL_MS: '20', ...env });
  const project = await seedProject(ctx.services);
  await ctx.services.smtpSettings.setFromUrl(
    project.projectId,
    `smtp://127.0.0.1:${target.port}?security=none`,
  );
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications/batch',
    headers: { authorization: `Bearer ${project.apiKey}` },
    payload: Array.from({ length: count }, (_, i) => ({
      template: 'user_created',
      to: `user${i}@example.org`,
      data: { user_name: `User ${i}` },
    })),
  });
  expect(response.statusCode).toBe(202);
  const ids = response
    .json<{ notifications: { request_id: string }[] }>()
    .notifications.map((n) => n.request_id);
  worker = createWorker(ctx.services);
  worker.start();
  return { ids, apiKey: project.apiKey };
}

async function finalStates(ids: string[], apiKey: string): Promise<Record<string, number>> {
  const states: Record<string, number> = {};
  for (const id of ids) {
    const response = await ctx!.app.inject({
      url: `/api/v1/notifications/${id}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    const { status, attempts } = response.json<{ status: string; attempts: number }>();
    const key = `${status} after ${attempts}`;
    states[key] = (states[key] ?? 0) + 1;
  }
  return states;
}

describe('the window of transactions per relay', () => {
  it(
    'grows past its start to the ceiling on a slow relay that takes everything',
    { timeout: 60_000 },
    async () => {
      relay = await new ThrottlingRelay(150).start();
      const { ids, apiKey } = await sendThrough(relay, 150, { HERALD_SMTP_MAX_CONNECTIONS: '12' });
      await waitUntil(() => (relay!.accepted >= ids.length ? true : undefined), {
        timeoutMs: 45_000,
        what: 'every message at the relay',
      });
      // It started at 5 and never went past the ceiling.
      expect(relay.peakInFlight).toBe(12);
      expect([...worker!.mail.relayWindows().values()]).toEqual([12]);
      expect(relay.refused).toBe(0);
      await worker!.stop();
      expect(await finalStates(ids, apiKey)).toEqual({ 'sent after 1': ids.length });
    },
  );

  it(
    'keeps to the limit of a relay that answers 421 4.7.0 past two connections, and loses nothing',
    { timeout: 90_000 },
    async () => {
      relay = await new ThrottlingRelay(50, 2).start();
      const { ids, apiKey } = await sendThrough(relay, 100, {
        HERALD_DELIVERY_RETRY_BASE_MS: '20',
        HERALD_DELIVERY_MAX_ATTEMPTS: '50',
      });
      await waitUntil(() => (relay!.accepted >= ids.length ? true : undefined), {
        timeoutMs: 75_000,
        what: 'every message at the relay',
      });
      await worker!.stop();
      // A connection refused while others of the relay's transactions were being served is no
      // failed attempt: the message waited for a lane there and went out on its first attempt.
      expect(await finalStates(ids, apiKey)).toEqual({ 'sent after 1': ids.length });
      const window = [...worker!.mail.relayWindows().values()];
      expect(window).toHaveLength(1);
      expect(window[0]).toBeLessThanOrEqual(3);
      // Held at the initial 5 lanes, three of every five connections would be refused (about 150
      // for 100 messages). The window keeps probing for room, one past the limit now and then.
      console.info(`relay window: ${relay.refused} connections refused for ${ids.length} messages`);
      expect(relay.refused).toBeLessThan(ids.length / 2);
    },
  );
});
