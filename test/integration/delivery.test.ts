import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/roles.js';
import type { Worker } from '../../src/roles.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { deadRelay } from '../helpers/dead-relays.js';
import { settledStatus } from '../helpers/http.js';

/** End to end: HTTP send → store → worker → a real SMTP server in this process. */

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;

const FAST_RETRIES = {
  HERALD_DELIVERY_RETRY_BASE_MS: '20',
  HERALD_DELIVERY_MAX_ATTEMPTS: '3',
  HERALD_DELIVERY_POLL_MS: '20',
  HERALD_SMTP_TIMEOUT_MS: '2000',
};

async function start(env: Record<string, string>): Promise<void> {
  ctx = await createTestContext({ ...FAST_RETRIES, ...env });
  worker = createWorker(ctx.services);
  worker.start();
}

async function stop(): Promise<void> {
  await worker.stop();
  await ctx.close();
}

async function send(apiKey: string, body: Record<string, unknown>): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: body,
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

const settled = (apiKey: string, requestId: string) => settledStatus(ctx.app, apiKey, requestId);

beforeAll(async () => {
  sink = await new SmtpSink().start();
});
afterAll(() => sink.stop());

describe('delivery over SMTP', () => {
  beforeAll(() => start({ HERALD_SMTP_URL: sink.url }));
  afterAll(() => stop());
  afterEach(() => {
    sink.rejectRecipients.clear();
    sink.failNext = null;
  });

  it('delivers the rendered subject, text, HTML and recipient', async () => {
    const { apiKey } = await seedProject(ctx.services, {
      template: {
        name: 'user_created',
        subject: 'Welcome {{ user_name }}',
        text: 'Hello {{user_name}}, your role is {{role}}.',
        html: '<p>Hello {{user_name}}</p>',
      },
    });
    const before = sink.messages.length;
    const requestId = await send(apiKey, {
      template: 'user_created',
      to: 'Jane Doe <jane@example.org>',
      data: { user_name: 'Jane <b>', role: 'admin' },
    });
    const body = await settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'sent', attempts: 1, transport: 'smtp' });
    expect(body.sent_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(body.error_message).toBeUndefined();

    await sink.waitFor(before + 1);
    const message = sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId);
    expect(message).toBeDefined();
    expect(message!.envelopeTo).toEqual(['jane@example.org']);
    expect(message!.envelopeFrom).toBe('noreply@herald.example');
    expect(message!.parsed.subject).toBe('Welcome Jane <b>');
    expect(message!.parsed.text?.trim()).toBe('Hello Jane <b>, your role is admin.');
    expect(message!.parsed.html).toContain('<p>Hello Jane &lt;b&gt;</p>');
    expect(message!.parsed.to).toMatchObject({ value: [{ name: 'Jane Doe', address: 'jane@example.org' }] });
    expect(message!.parsed.messageId).toBe(`<${requestId}@herald.example>`);
    expect(message!.raw.toString('latin1')).not.toMatch(/[^\r]\n/);
  });

  it('sends to an internationalised domain in its ASCII form, and reports that form', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const before = sink.messages.length;
    const requestId = await send(apiKey, { template: 'user_created', to: 'Jürgen <jurgen@Bücher.example>' });
    const body = await settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'sent', to: '"Jürgen" <jurgen@xn--bcher-kva.example>' });
    await sink.waitFor(before + 1);
    const message = sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId);
    // smtp-server shows the envelope's domain decoded; the header holds what went on the wire.
    expect(message!.envelopeTo).toEqual(['jurgen@bücher.example']);
    expect(message!.raw.toString('latin1')).toMatch(
      /^To: =\?UTF-8\?Q\?J=C3=BCrgen\?= <jurgen@xn--bcher-kva\.example>\r$/m,
    );
  });

  it('renders placeholders with no matching key blank and raises no error', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const requestId = await send(apiKey, {
      template: 'user_created',
      to: 'a@b.example',
      data: { username: 'x' },
    });
    expect(await settled(apiKey, requestId)).toMatchObject({ status: 'sent' });
    const { notification } = await ctx.services.notifications.detail(requestId);
    expect(notification.subject).toBe('Welcome');
    expect(notification.text_body).toBe('Hello , your role is .');
  });

  it('fails at once with the reply code when the relay answers 5xx', async () => {
    const { apiKey } = await seedProject(ctx.services);
    sink.rejectRecipients.set('gone@example.org', [
      550,
      '5.1.1 <gone@example.org>: Recipient address rejected',
    ]);
    const requestId = await send(apiKey, { template: 'user_created', to: 'gone@example.org' });
    const body = await settled(apiKey, requestId);
    expect(body.status).toBe('failed');
    expect(body.attempts).toBe(1);
    expect(body.error_message).toBe('SMTP 550 5.1.1 <gone@example.org>: Recipient address rejected');
    const { attempts } = await ctx.services.notifications.detail(requestId);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ outcome: 'failed', smtp_code: 550 });
  });

  it('retries a 4xx and then succeeds, recording both attempts', async () => {
    const { apiKey } = await seedProject(ctx.services);
    sink.failNext = { count: 1, code: 451, message: '4.3.0 Try again later' };
    const requestId = await send(apiKey, { template: 'user_created', to: 'retry@example.org' });
    const body = await settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'sent', attempts: 2 });
    const { attempts } = await ctx.services.notifications.detail(requestId);
    expect(attempts.map((a) => [a.outcome, a.smtp_code])).toEqual([
      ['retry', 451],
      ['sent', 250],
    ]);
    expect(attempts[0]!.response).toBe('SMTP 451 4.3.0 Try again later');
  });

  it('keeps the usage counters in step with every state change, a retry included', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    sink.rejectRecipients.set('counted-gone@example.org', [550, '5.1.1 no such user']);
    sink.failNext = { count: 1, code: 451, message: '4.3.0 Try again later' };
    const ids = [
      await send(apiKey, { template: 'user_created', to: 'counted-a@example.org' }),
      await send(apiKey, { template: 'user_created', to: 'counted-b@example.org' }),
      await send(apiKey, { template: 'user_created', to: 'counted-gone@example.org' }),
      await send(apiKey, { template: 'no_such_template', to: 'counted-c@example.org' }),
    ];
    for (const id of ids) await settled(apiKey, id);
    const counts = await ctx.services.notifications.counts(projectId);
    expect(counts).toEqual({ queued: 0, sending: 0, sent: 2, failed: 2 });
    expect(await ctx.services.usage.totals(projectId)).toEqual({ queued: 0, sent: 2, failed: 2 });
  });

  it('fails with "Template not found" for a name that differs only in case', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const requestId = await send(apiKey, { template: 'User_Created', to: 'a@b.example' });
    const body = await settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'failed', error_message: 'Template not found', attempts: 1 });
  });

  it("does not use another project's template", async () => {
    await seedProject(ctx.services, {
      template: { name: 'only_mine', subject: 's', text: 't' },
    });
    const other = await seedProject(ctx.services);
    const requestId = await send(other.apiKey, { template: 'only_mine', to: 'a@b.example' });
    expect(await settled(other.apiKey, requestId)).toMatchObject({
      status: 'failed',
      error_message: 'Template not found',
    });
  });

  it('retries while the relay refuses connections, then fails', async () => {
    const { projectId, apiKey } = await seedProject(ctx.services);
    // A project's own SMTP settings win over HERALD_SMTP_URL; nothing listens on port 9.
    await ctx.services.smtpSettings.setFromUrl(projectId, 'smtp://127.0.0.1:9?security=none');
    const requestId = await send(apiKey, { template: 'user_created', to: 'a@b.example' });
    const body = await settled(apiKey, requestId);
    expect(body.status).toBe('failed');
    expect(body.attempts).toBe(3);
    expect(body.error_message).toMatch(/ECONNREFUSED|ECONNECTION/);
    const { attempts } = await ctx.services.notifications.detail(requestId);
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'failed']);
  });

  it('retries a relay that takes the connection and never greets, saying so', async () => {
    const relay = await deadRelay('silent', ctx.services.mailer);
    try {
      const { projectId, apiKey } = await seedProject(ctx.services);
      await ctx.services.smtpSettings.setFromUrl(projectId, `smtp://127.0.0.1:${relay.port}?security=none`);
      const requestId = await send(apiKey, { template: 'user_created', to: 'a@b.example' });
      const body = await settled(apiKey, requestId);
      const silent = `The relay at 127.0.0.1:${relay.port} accepted the connection but sent no greeting before the 2 s deadline`;
      // Its last attempts may not be made once it is judged down: they say so, naming this failure.
      expect(body).toMatchObject({ status: 'failed', attempts: 3 });
      expect([silent, `Relay down: ${silent}`]).toContain(body.error_message);
      const { attempts } = await ctx.services.notifications.detail(requestId);
      expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'failed']);
      expect(attempts[0]?.response).toBe(silent);
    } finally {
      await relay.close();
    }
  });
});

describe('without any SMTP server', () => {
  afterEach(() => stop());

  it('captures the message outside production', async () => {
    await start({});
    const { apiKey } = await seedProject(ctx.services);
    const before = sink.messages.length;
    const requestId = await send(apiKey, {
      template: 'user_created',
      to: 'a@b.example',
      data: { user_name: 'Jo' },
    });
    const body = await settled(apiKey, requestId);
    expect(body).toMatchObject({ status: 'sent', transport: 'capture' });
    const { notification, attempts } = await ctx.services.notifications.detail(requestId);
    expect(notification.subject).toBe('Welcome Jo');
    expect(attempts[0]?.transport).toBe('capture');
    expect(sink.messages.length).toBe(before);
  });

  it('fails with "SMTP not configured" in production', async () => {
    await start({ NODE_ENV: 'production' });
    const { apiKey } = await seedProject(ctx.services);
    const requestId = await send(apiKey, { template: 'user_created', to: 'a@b.example' });
    expect(await settled(apiKey, requestId)).toMatchObject({
      status: 'failed',
      error_message: 'SMTP not configured',
    });
  });
});

describe('the sender address', () => {
  afterEach(() => stop());

  async function projectWithoutSender(): Promise<string> {
    const { project, apiKey } = await ctx.services.projects.create({ name: `nofrom-${Date.now()}` });
    await ctx.services.templates.create(project.id, { name: 'ping', subject: 'Ping', text: 'Ping' });
    return apiKey;
  }

  it('falls back to HERALD_SMTP_FROM when the project names none', async () => {
    await start({ HERALD_SMTP_URL: sink.url, HERALD_SMTP_FROM: 'Ops Team <ops@herald.example>' });
    const apiKey = await projectWithoutSender();
    const requestId = await send(apiKey, { template: 'ping', to: 'a@b.example' });
    expect(await settled(apiKey, requestId)).toMatchObject({ status: 'sent' });
    const message = sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId);
    expect(message?.envelopeFrom).toBe('ops@herald.example');
    expect(message?.parsed.from).toMatchObject({
      value: [{ name: 'Ops Team', address: 'ops@herald.example' }],
    });
  });

  it('fails clearly when no sender is configured anywhere', async () => {
    await start({ HERALD_SMTP_URL: sink.url });
    const apiKey = await projectWithoutSender();
    const requestId = await send(apiKey, { template: 'ping', to: 'a@b.example' });
    const body = await settled(apiKey, requestId);
    expect(body.status).toBe('failed');
    expect(body.error_message).toMatch(/^No from address configured/);
  });
});
