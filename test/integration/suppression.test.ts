import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/roles.js';
import type { StatusBody } from '../../src/services/notifications.js';
import type { Worker } from '../../src/roles.js';
import { bearer, settledStatus, statusOf } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * The suppression list end to end (product.md §5, docs/webhooks.md "The suppression list"): a
 * relay's refusal that proves the mailbox bad suppresses the address in the outcome's transaction;
 * a later send to it is accepted and fails without any SMTP transaction. The relay is a real SMTP
 * server (the `smtp-server` package) that counts every MAIL FROM and RCPT TO it is given.
 */

/** A relay that refuses chosen recipients at RCPT TO and counts the commands it receives. */
class CountingRelay {
  /** Lowercased address → [code, text] it is refused with at RCPT TO. */
  readonly refuse = new Map<string, [number, string]>();
  /** Lowercased recipient → [code, text] the message is refused with after DATA. */
  readonly refuseData = new Map<string, [number, string]>();
  /** Every MAIL FROM is refused with this, when set. */
  refuseMailFrom: [number, string] | null = null;
  mailFrom = 0;
  /** RCPT TO commands per lowercased address. */
  readonly rcpt = new Map<string, number>();
  /** Messages accepted after DATA, by lowercased recipient. */
  readonly delivered = new Map<string, number>();
  private readonly server: SMTPServer;
  port = 0;

  constructor() {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onMailFrom: (_address, _session, callback) => {
        this.mailFrom++;
        if (this.refuseMailFrom === null) return callback();
        const [code, text] = this.refuseMailFrom;
        callback(Object.assign(new Error(text), { responseCode: code }));
      },
      onRcptTo: (address, _session, callback) => {
        const key = address.address.toLowerCase();
        this.rcpt.set(key, (this.rcpt.get(key) ?? 0) + 1);
        const refusal = this.refuse.get(key);
        if (refusal === undefined) return callback();
        callback(Object.assign(new Error(refusal[1]), { responseCode: refusal[0] }));
      },
      onData: (stream, session, callback) => {
        stream.on('data', () => {});
        stream.on('end', () => {
          const refusal = session.envelope.rcptTo
            .map((to) => this.refuseData.get(to.address.toLowerCase()))
            .find((r) => r !== undefined);
          if (refusal !== undefined)
            return callback(Object.assign(new Error(refusal[1]), { responseCode: refusal[0] }));
          for (const to of session.envelope.rcptTo) {
            const key = to.address.toLowerCase();
            this.delivered.set(key, (this.delivered.get(key) ?? 0) + 1);
          }
          callback(null);
        });
      },
    });
    this.server.on('error', () => {});
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}?security=none`;
  }

  rcptFor(address: string): number {
    return this.rcpt.get(address.toLowerCase()) ?? 0;
  }

  deliveredTo(address: string): number {
    return this.delivered.get(address.toLowerCase()) ?? 0;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A relay that answers every RCPT TO with the given multi-line reply, as Gmail does for an unknown
 * user. smtp-server cannot send one (it flattens line breaks in an error's text), so this speaks
 * the few commands a client needs over a raw socket.
 */
async function multilineRelay(
  reply: readonly string[],
): Promise<{ url: string; rcpt: () => number; close(): Promise<void> }> {
  let rcpt = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write('220 mx.example.com ESMTP\r\n');
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
        const verb = buffer.slice(0, 4).toUpperCase();
        buffer = buffer.slice(end + 2);
        if (verb === 'EHLO' || verb === 'HELO') socket.write('250 mx.example.com\r\n');
        else if (verb === 'MAIL' || verb === 'RSET' || verb === 'NOOP') socket.write('250 2.0.0 OK\r\n');
        else if (verb === 'RCPT') {
          rcpt++;
          socket.write(reply.map((line) => `${line}\r\n`).join(''));
        } else if (verb === 'QUIT') socket.end('221 2.0.0 Bye\r\n');
        else socket.write('502 5.5.1 Unrecognized command\r\n');
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}?security=none`,
    rcpt: () => rcpt,
    async close() {
      // Herald's pool keeps an idle connection open; it is not waited for.
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

let relay: CountingRelay;
let ctx: TestContext;
let worker: Worker;

beforeAll(async () => {
  relay = await new CountingRelay().start();
  ctx = await createTestContext({
    HERALD_SMTP_URL: relay.url,
    HERALD_DELIVERY_POLL_MS: '20',
    HERALD_DELIVERY_RETRY_BASE_MS: '20',
    HERALD_DELIVERY_MAX_ATTEMPTS: '3',
    HERALD_SMTP_TIMEOUT_MS: '5000',
    HERALD_STOP_TIMEOUT_MS: '5000',
  });
  worker = createWorker(ctx.services);
  worker.start();
});
afterAll(async () => {
  await worker.stop();
  await ctx.close();
  await relay.stop();
});
afterEach(() => {
  relay.refuse.clear();
  relay.refuseData.clear();
  relay.refuseMailFrom = null;
});

async function send(apiKey: string, to: string): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: bearer(apiKey),
    payload: { template: 'user_created', to, data: { user_name: 'Jane' } },
  });
  // Accepted whatever the suppression list says (the interface specification's 202).
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

const status = (apiKey: string, requestId: string) => statusOf(ctx.app, apiKey, requestId);

const settled = (apiKey: string, requestId: string) => settledStatus(ctx.app, apiKey, requestId);

async function suppressions(projectId: number) {
  return ctx.services.suppressions.list(projectId);
}

/** A send to a suppressed address: 202, then failed with exactly this reason, and no SMTP at all. */
async function expectSuppressed(
  apiKey: string,
  to: string,
  reason: 'hard_bounce' | 'manual',
): Promise<StatusBody> {
  const mailFrom = relay.mailFrom;
  const rcpt = relay.rcptFor(bare(to));
  const requestId = await send(apiKey, to);
  const body = await settled(apiKey, requestId);
  expect(body).toMatchObject({ status: 'failed', error_message: `Recipient is suppressed (${reason})` });
  const { attempts } = await ctx.services.notifications.detail(requestId);
  expect(attempts.map((a) => [a.outcome, a.smtp_code])).toEqual([['failed', null]]);
  expect(relay.mailFrom).toBe(mailFrom);
  expect(relay.rcptFor(bare(to))).toBe(rcpt);
  return body;
}

function bare(to: string): string {
  return /<([^>]+)>/.exec(to)?.[1] ?? to;
}

describe('suppression by SMTP replies', () => {
  it('suppresses an address refused with 550 5.1.1 and fails later sends to it, in any case, without SMTP', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const reply = '5.1.1 <gone@example.org>: Recipient address rejected: User unknown';
    relay.refuse.set('gone@example.org', [550, reply]);

    const requestId = await send(apiKey, 'gone@example.org');
    const failed = await settled(apiKey, requestId);
    expect(failed).toMatchObject({ status: 'failed', error_message: `SMTP 550 ${reply}` });
    expect(relay.rcptFor('gone@example.org')).toBe(1);

    const list = await suppressions(projectId);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      project_id: projectId,
      email: 'gone@example.org',
      reason: 'hard_bounce',
      request_id: requestId,
    });
    expect(list[0]!.detail).toContain(`550 ${reply}`);

    // Other spellings of the same address are the same address; the relay is never asked again.
    relay.refuse.clear();
    await expectSuppressed(apiKey, 'GONE@Example.ORG', 'hard_bounce');
    await expectSuppressed(apiKey, 'Gone Away <gone@example.org>', 'hard_bounce');
    await expectSuppressed(apiKey, 'gone@EXAMPLE.org', 'hard_bounce');
    expect(relay.rcptFor('gone@example.org')).toBe(1);
    expect(relay.deliveredTo('gone@example.org')).toBe(0);

    // An address on the list keeps its first entry, and adding it is not a creation.
    const again = await ctx.services.suppressions.add(projectId, 'Gone@example.org');
    expect(again).toEqual({ entry: list[0], created: false });
  });

  it('suppresses an address refused with 5.1.10 (no such recipient), naming the category', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const address = 'dead-5-1-10@example.net';
    const refusal = [
      550,
      '5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup',
    ] as const;
    relay.refuse.set(address, [...refusal]);
    const requestId = await send(apiKey, address);
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      error_message: `SMTP ${refusal[0]} ${refusal[1]}`,
      bounce: { type: 'hard', category: 'user_unknown', status: '5.1.10' },
    });
    expect(await suppressions(projectId)).toEqual([
      expect.objectContaining({ email: address, reason: 'hard_bounce', request_id: requestId }),
    ]);
    expect((await suppressions(projectId))[0]!.detail).toMatch(/^user_unknown: SMTP 550 5\.1\.10 /);
    relay.refuse.clear();
    await expectSuppressed(apiKey, address, 'hard_bounce');
  });

  it('names the category of a full mailbox (552 5.2.2): soft, failed, not suppressed', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const address = 'full-5-2-2@example.net';
    relay.refuse.set(address, [552, '5.2.2 <full-5-2-2@example.net>: Mailbox full']);
    const requestId = await send(apiKey, address);
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      bounce: {
        type: 'soft',
        category: 'mailbox_full',
        status: '5.2.2',
        diagnostic: 'SMTP 552 5.2.2 <full-5-2-2@example.net>: Mailbox full',
      },
    });
    expect(await suppressions(projectId)).toEqual([]);
    relay.refuse.clear();
  });

  it('fails a disabled mailbox (5.2.1) as suspended without suppressing it', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const address = 'disabled-5-2-1@example.net';
    relay.refuse.set(address, [550, '5.2.1 The email account that you tried to reach is disabled']);
    const requestId = await send(apiKey, address);
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      bounce: { type: 'soft', category: 'suspended', status: '5.2.1' },
    });
    expect(await suppressions(projectId)).toEqual([]);
    relay.refuse.clear();
    const again = await send(apiKey, address);
    expect(await settled(apiKey, again)).toMatchObject({ status: 'sent' });
  });

  it("suppresses on Gmail's multi-line 550-5.1.1 reply", async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const gmail = await multilineRelay([
      '550-5.1.1 The email account that you tried to reach does not exist. Please try',
      "550-5.1.1 double-checking the recipient's email address for typos or",
      '550-5.1.1 unnecessary spaces. For more information, go to',
      '550 5.1.1  https://support.google.com/mail/?p=NoSuchUser a1b2c3d4e5f6 - gsmtp',
    ]);
    try {
      // The project's own relay wins over HERALD_SMTP_URL.
      await ctx.services.smtpSettings.setFromUrl(projectId, gmail.url);
      const requestId = await send(apiKey, 'nobody.here@gmail.example');
      const body = await settled(apiKey, requestId);
      expect(body.status).toBe('failed');
      expect(body.error_message).toMatch(
        /^SMTP 550[- ]5\.1\.1 The email account that you tried to reach does not exist/,
      );
      expect(gmail.rcpt()).toBe(1);
      expect(await suppressions(projectId)).toEqual([
        expect.objectContaining({
          email: 'nobody.here@gmail.example',
          reason: 'hard_bounce',
          request_id: requestId,
        }),
      ]);
      const next = await send(apiKey, 'Nobody.Here@gmail.example');
      expect(await settled(apiKey, next)).toMatchObject({
        status: 'failed',
        error_message: 'Recipient is suppressed (hard_bounce)',
      });
      expect(gmail.rcpt()).toBe(1);
    } finally {
      await gmail.close();
    }
  });

  it('stores one entry when several messages to the address are refused together', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    relay.refuse.set('many@example.org', [550, '5.1.1 <many@example.org>: User unknown']);
    // One batch: the messages are claimed together and their outcomes committed in one group,
    // so the same address is added more than once in one statement.
    const spellings = ['many@example.org', 'MANY@example.org', 'Many <many@Example.org>'];
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications/batch',
      headers: bearer(apiKey),
      payload: Array.from({ length: 9 }, (_, i) => ({
        template: 'user_created',
        to: spellings[i % spellings.length],
        data: { user_name: 'Many' },
      })),
    });
    expect(response.statusCode, response.body).toBe(202);
    const ids = response.json<{ notifications: { request_id: string }[] }>().notifications;
    for (const { request_id } of ids) {
      const body = await settled(apiKey, request_id);
      expect(body.status).toBe('failed');
      expect(body.error_message).toMatch(
        /^(SMTP 550 5\.1\.1 <many@example\.org>: User unknown|Recipient is suppressed \(hard_bounce\))$/,
      );
    }
    const list = await suppressions(projectId);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ email: 'many@example.org', reason: 'hard_bounce' });
    expect(ids.map((n) => n.request_id)).toContain(list[0]!.request_id);
  });

  it('suppresses on a 550 5.1.1 to the message after DATA', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const reply = '5.1.1 <late@example.org>: mailbox does not exist';
    relay.refuseData.set('late@example.org', [550, reply]);
    const requestId = await send(apiKey, 'late@example.org');
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      error_message: `SMTP 550 ${reply}`,
    });
    expect(relay.rcptFor('late@example.org')).toBe(1);
    expect(await suppressions(projectId)).toEqual([
      expect.objectContaining({ email: 'late@example.org', reason: 'hard_bounce', request_id: requestId }),
    ]);
    relay.refuseData.clear();
    await expectSuppressed(apiKey, 'late@example.org', 'hard_bounce');
  });

  it('does not suppress the recipient when the relay refuses the sender (MAIL FROM) with 5.1.1', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    // A relay that verifies senders, while the envelope sender's domain is in trouble.
    const reply = '5.1.1 <noreply@herald.example>: Sender address rejected: User unknown';
    relay.refuseMailFrom = [550, reply];
    const requestId = await send(apiKey, 'innocent@example.org');
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      error_message: `SMTP 550 ${reply}`,
    });
    expect(relay.rcptFor('innocent@example.org')).toBe(0);
    expect(await suppressions(projectId)).toEqual([]);

    relay.refuseMailFrom = null;
    const next = await send(apiKey, 'innocent@example.org');
    expect(await settled(apiKey, next)).toMatchObject({ status: 'sent' });
    expect(relay.deliveredTo('innocent@example.org')).toBe(1);
  });

  it('fails a 550 5.7.1 policy refusal without suppressing, and tries the next send again', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const reply = '5.7.1 <policy@example.org>: Recipient address rejected: Access denied';
    relay.refuse.set('policy@example.org', [550, reply]);
    const first = await send(apiKey, 'policy@example.org');
    expect(await settled(apiKey, first)).toMatchObject({
      status: 'failed',
      error_message: `SMTP 550 ${reply}`,
    });
    expect(await suppressions(projectId)).toEqual([]);

    relay.refuse.clear();
    const second = await send(apiKey, 'policy@example.org');
    expect(await settled(apiKey, second)).toMatchObject({ status: 'sent' });
    expect(relay.rcptFor('policy@example.org')).toBe(2);
    expect(relay.deliveredTo('policy@example.org')).toBe(1);
  });

  it.each([
    // Postfix with unknown_local_recipient_reject_code = 450: "user unknown", but only for now.
    ['4.1.1', '4.1.1 <soft@example.org>: Recipient address rejected: User unknown in local recipient table'],
    // A relay whose enhanced status disagrees with its reply code: the reply code decides.
    ['5.1.1', '5.1.1 <soft@example.org>: Mailbox lookup failed, try again later'],
  ])(
    'never suppresses on a 450 with enhanced status %s, also when the attempts run out',
    async (_status, reply) => {
      const { projectId, apiKey } = await seedProject(ctx.services);
      const rcptBefore = relay.rcptFor('soft@example.org');
      const deliveredBefore = relay.deliveredTo('soft@example.org');
      relay.refuse.set('soft@example.org', [450, reply]);
      const requestId = await send(apiKey, 'soft@example.org');
      const body = await settled(apiKey, requestId);
      expect(body).toMatchObject({ status: 'failed', attempts: 3, error_message: `SMTP 450 ${reply}` });
      expect(relay.rcptFor('soft@example.org') - rcptBefore).toBe(3);
      expect(await suppressions(projectId)).toEqual([]);

      relay.refuse.clear();
      const next = await send(apiKey, 'soft@example.org');
      expect(await settled(apiKey, next)).toMatchObject({ status: 'sent' });
      expect(relay.deliveredTo('soft@example.org') - deliveredBefore).toBe(1);
    },
  );

  it('keeps the list per project: another project still mails the address', async () => {
    const a = await seedProject(ctx.services);
    const b = await seedProject(ctx.services);
    relay.refuse.set('shared@example.org', [550, '5.1.1 <shared@example.org>: User unknown']);
    const refused = await send(a.apiKey, 'shared@example.org');
    expect((await settled(a.apiKey, refused)).status).toBe('failed');
    expect((await suppressions(a.projectId)).map((s) => s.email)).toEqual(['shared@example.org']);
    relay.refuse.clear();

    await expectSuppressed(a.apiKey, 'shared@example.org', 'hard_bounce');
    const fromB = await send(b.apiKey, 'Shared@Example.org');
    expect(await settled(b.apiKey, fromB)).toMatchObject({ status: 'sent' });
    expect(relay.deliveredTo('shared@example.org')).toBe(1);
    expect(await suppressions(b.projectId)).toEqual([]);
  });
});

describe('managing the list', () => {
  it('adds by hand (manual), fails sends to it, and mails the address again once removed', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    const { entry: added, created } = await ctx.services.suppressions.add(
      projectId,
      'Jane Roe <Manual@Example.org>',
    );
    expect(created).toBe(true);
    expect(added).toMatchObject({
      project_id: projectId,
      email: 'manual@example.org',
      reason: 'manual',
      request_id: null,
      detail: null,
    });
    expect(await suppressions(projectId)).toHaveLength(1);
    await expectSuppressed(apiKey, 'manual@example.org', 'manual');

    await ctx.services.suppressions.remove(projectId, 'MANUAL@example.org');
    expect(await suppressions(projectId)).toEqual([]);
    const requestId = await send(apiKey, 'manual@example.org');
    expect(await settled(apiKey, requestId)).toMatchObject({ status: 'sent' });
    expect(relay.deliveredTo('manual@example.org')).toBe(1);
  });

  it('refuses what is not an address, and removing an address that is not listed', async () => {
    const { projectId } = await seedProject(ctx.services);
    for (const email of ['not-an-email', '', 'a@', 'two@example.org, three@example.org'])
      await expect(ctx.services.suppressions.add(projectId, email)).rejects.toThrow(/Not an email address/);
    await expect(ctx.services.suppressions.remove(projectId, 'nobody@example.org')).rejects.toThrow(
      /Not on the suppression list/,
    );
    expect(await suppressions(projectId)).toEqual([]);
  });

  it('answers every add with its entry while removes of the address race it', async () => {
    const { projectId } = await seedProject(ctx.services);
    const service = ctx.services.suppressions;
    const email = 'flap@example.org';
    const notListed = (error: unknown) => {
      if (!/Not on the suppression list/.test(String(error))) throw error;
    };
    const added = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const [add] = await Promise.all([
          service.add(projectId, email),
          service.remove(projectId, email).catch(notListed),
        ]);
        return add.entry.email;
      }),
    );
    expect(added).toEqual(added.map(() => email));
  });

  it('scopes manual entries to their project', async () => {
    const a = await seedProject(ctx.services);
    const b = await seedProject(ctx.services);
    await ctx.services.suppressions.add(a.projectId, 'only-a@example.org');
    await expectSuppressed(a.apiKey, 'only-a@example.org', 'manual');
    await expect(ctx.services.suppressions.remove(b.projectId, 'only-a@example.org')).rejects.toThrow(
      /Not on the suppression list/,
    );
    const fromB = await send(b.apiKey, 'only-a@example.org');
    expect(await settled(b.apiKey, fromB)).toMatchObject({ status: 'sent' });
  });
});

describe('events', () => {
  it('reports the suppressed failure as notification.failed with its error_message', async () => {
    const { projectId, apiKey, name } = await seedProject(ctx.services);
    // An endpoint makes the project's events be recorded (nothing answers there: its calls fail).
    const { endpoint } = await ctx.services.webhooks.create(projectId, { url: 'http://127.0.0.1:9/hooks' });
    relay.refuse.set('bounced@example.org', [550, '5.1.1 <bounced@example.org>: User unknown']);
    const first = await send(apiKey, 'bounced@example.org');
    expect((await settled(apiKey, first)).status).toBe('failed');
    relay.refuse.clear();

    const body = await expectSuppressed(apiKey, 'Bounced@example.org', 'hard_bounce');
    const events = await ctx.services.storage.db
      .selectFrom('webhook_events')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('id')
      .execute();
    expect(events.map((e) => [e.type, e.notification_id])).toEqual([
      ['notification.failed', (await status(apiKey, first)).id],
      ['notification.failed', body.id],
    ]);
    const payload = JSON.parse(events[1]!.payload) as { type: string; timestamp: string; data: unknown };
    expect(payload).toEqual({
      type: 'notification.failed',
      timestamp: body.updated_at,
      data: { ...body, project: name },
    });
    expect(payload.data).toMatchObject({ error_message: 'Recipient is suppressed (hard_bounce)' });
    const deliveries = await ctx.services.storage.db
      .selectFrom('webhook_deliveries')
      .select(['event_id', 'endpoint_id'])
      .where('event_id', '=', events[1]!.id)
      .execute();
    expect(deliveries).toEqual([{ event_id: events[1]!.id, endpoint_id: endpoint.id }]);
  });
});
