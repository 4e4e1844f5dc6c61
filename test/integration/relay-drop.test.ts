import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A relay that greets and then drops connections: `{ afterBodyOf }` reads that recipient's whole
 * body and closes the connection without a reply, taking every other message; `{ atEhlo: true }`
 * closes every connection when EHLO comes; `{ atLoginOf }` offers AUTH PLAIN and closes the
 * connection when that user logs in, taking every other login. nodemailer labels these failures
 * `CONN`, like a refused connection; but the relay had greeted (and in the first case the message
 * may have reached it), so each is a failed attempt, counted and retried with backoff, never
 * re-sent at once as a refusal for room would be.
 */
class DroppingRelay {
  port = 0;
  accepted = 0;
  greetings = 0;
  readonly bodies = new Map<string, number>();
  readonly logins = new Map<string, number>();
  private readonly server: net.Server;

  constructor(
    private readonly drop:
      { readonly afterBodyOf: string } | { readonly atEhlo: true } | { readonly atLoginOf: string },
  ) {
    this.server = net.createServer((socket) => this.session(socket));
  }

  private session(socket: net.Socket): void {
    socket.on('error', () => {});
    this.greetings++;
    socket.write('220 relay.test ESMTP\r\n');
    let buffer = '';
    let inData = false;
    let recipient = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffer = buffer.slice(end + 5);
          inData = false;
          this.bodies.set(recipient, (this.bodies.get(recipient) ?? 0) + 1);
          if ('afterBodyOf' in this.drop && recipient === this.drop.afterBodyOf) return void socket.destroy();
          this.accepted++;
          setTimeout(() => socket.destroyed || socket.write('250 2.0.0 queued\r\n'), 20);
          continue;
        }
        const newline = buffer.indexOf('\r\n');
        if (newline < 0) return;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') {
          if ('atEhlo' in this.drop) return void socket.destroy();
          socket.write(
            'atLoginOf' in this.drop ? '250-relay.test\r\n250 AUTH PLAIN\r\n' : '250 relay.test\r\n',
          );
        } else if (verb === 'AUTH') {
          // AUTH PLAIN with its initial response: NUL, user, NUL, password.
          const user =
            Buffer.from(line.split(' ')[2] ?? '', 'base64')
              .toString('utf8')
              .split('\0')[1] ?? '';
          this.logins.set(user, (this.logins.get(user) ?? 0) + 1);
          if ('atLoginOf' in this.drop && user === this.drop.atLoginOf) return void socket.destroy();
          socket.write('235 2.7.0 Authentication successful\r\n');
        } else if (verb === 'RCPT') {
          recipient = /<([^>]*)>/.exec(line)?.[1] ?? '';
          socket.write('250 OK\r\n');
        } else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go on\r\n');
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 OK\r\n');
      }
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let ctx: TestContext | null = null;
let worker: Worker | null = null;
let relay: DroppingRelay | null = null;
afterEach(async () => {
  await worker?.stop();
  await ctx?.close();
  await relay?.stop();
  worker = ctx = relay = null;
});

/** A context whose worker delivers with three attempts, quickly retried. */
async function context(): Promise<TestContext> {
  ctx = await createTestContext({
    HERALD_DELIVERY_POLL_MS: '20',
    HERALD_DELIVERY_RETRY_BASE_MS: '20',
    HERALD_DELIVERY_MAX_ATTEMPTS: '3',
  });
  return ctx;
}

/**
 * Queues one send to each of `recipients` for a new project sending through `relay` (as `user`
 * when given), and returns their ids and a way to read a status.
 */
async function queue(relay: DroppingRelay, recipients: readonly string[], user?: string) {
  const { services, app } = ctx!;
  const project = await seedProject(services);
  const login = user === undefined ? '' : `${user}:secret@`;
  await services.smtpSettings.setFromUrl(
    project.projectId,
    `smtp://${login}127.0.0.1:${relay.port}?security=none`,
  );
  const response = await app.inject({
    method: 'POST',
    url: '/api/v1/notifications/batch',
    headers: { authorization: `Bearer ${project.apiKey}` },
    payload: recipients.map((to, i) => ({ template: 'user_created', to, data: { user_name: `User ${i}` } })),
  });
  expect(response.statusCode).toBe(202);
  const ids = response
    .json<{ notifications: { request_id: string }[] }>()
    .notifications.map((n) => n.request_id);
  const status = async (id: string) => {
    const reply = await app.inject({
      url: `/api/v1/notifications/${id}`,
      headers: { authorization: `Bearer ${project.apiKey}` },
    });
    return reply.json<{ status: string; attempts: number }>();
  };
  return { ids, status };
}

/** Queues one send to each of `recipients` for a project sending through `relay`, and starts a worker. */
async function sendThrough(relay: DroppingRelay, recipients: readonly string[]) {
  await context();
  const queued = await queue(relay, recipients);
  worker = createWorker(ctx!.services);
  worker.start();
  return queued;
}

describe('a relay that drops the connection after greeting', () => {
  it(
    'gets a message it drops after the body once per attempt while the rest of its mail goes on',
    { timeout: 90_000 },
    async () => {
      const dropped = 'dropped@example.org';
      relay = await new DroppingRelay({ afterBodyOf: dropped }).start();
      const recipients = [dropped, ...Array.from({ length: 150 }, (_, i) => `user${i}@example.org`)];
      const { ids, status } = await sendThrough(relay, recipients);
      const final = await waitUntil(
        async () => {
          const body = await status(ids[0]!);
          return body.status === 'failed' && relay!.accepted === recipients.length - 1 ? body : undefined;
        },
        {
          timeoutMs: 60_000,
          what: () => `the dropped message to fail (${relay!.bodies.get(dropped) ?? 0} bodies)`,
        },
      );
      // Taken for a refusal for room, it was re-sent at once, uncounted, while the others were
      // served: 149 bodies for 3 attempts.
      expect(final.attempts).toBe(3);
      expect(relay.bodies.get(dropped)).toBe(3);
    },
  );

  it('counts a connection closed at EHLO as an attempt', { timeout: 90_000 }, async () => {
    relay = await new DroppingRelay({ atEhlo: true }).start();
    const recipients = Array.from({ length: 20 }, (_, i) => `user${i}@example.org`);
    const { ids, status } = await sendThrough(relay, recipients);
    const finals = await waitUntil(
      async () => {
        const bodies = await Promise.all(ids.map(status));
        return bodies.every((body) => body.status === 'failed') ? bodies : undefined;
      },
      { timeoutMs: 60_000, what: () => `every message to fail (${relay!.greetings} connections)` },
    );
    expect(finals.map((body) => body.attempts)).toEqual(recipients.map(() => 3));
    // Each attempt met the relay. Judged by nodemailer's `CONN` label, a connection closed after the
    // greeting was one the relay never answered: it was taken for down after a few, and the other
    // attempts failed without trying it (7 connections for 60 attempts).
    expect(relay.greetings).toBe(3 * recipients.length);
  });

  it(
    "counts a connection closed at one project's login as that project's attempt",
    { timeout: 90_000 },
    async () => {
      relay = await new DroppingRelay({ atLoginOf: 'locked' }).start();
      await context();
      const open = Array.from({ length: 150 }, (_, i) => `user${i}@example.org`);
      const served = await queue(relay, open, 'open');
      const locked = await queue(relay, ['locked@example.org'], 'locked');
      worker = createWorker(ctx!.services);
      worker.start();
      const final = await waitUntil(
        async () => {
          const body = await locked.status(locked.ids[0]!);
          return body.status === 'failed' && relay!.accepted === open.length ? body : undefined;
        },
        {
          timeoutMs: 60_000,
          what: () => `the locked project's message to fail (${relay!.logins.get('locked') ?? 0} logins)`,
        },
      );
      expect(final.attempts).toBe(3);
      // Taken for a refusal for room while the other project's mail was served, the closed login was
      // tried again at once, uncounted: 24 logins for 3 attempts.
      expect(relay.logins.get('locked')).toBe(3);
      expect((await served.status(served.ids[0]!)).status).toBe('sent');
    },
  );
});
