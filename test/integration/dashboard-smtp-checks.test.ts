import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { csrfOf, dashboardApp, dashboardClient, type DashboardClient } from '../helpers/dashboard.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SMTPServer } from 'smtp-server';
import { SmtpSink } from '../helpers/smtp-sink.js';

/**
 * The SMTP page's checks for a project without settings of its own while Herald has a relay
 * (HERALD_SMTP_URL): its mail goes there, so "Verify connection" and "Send test email" check that
 * relay, against a real SMTP server.
 */

let sink: SmtpSink;
let ctx: TestContext;
let app: FastifyInstance;
let client: DashboardClient;
let projectId: number;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({ HERALD_SMTP_URL: sink.url, HERALD_SMTP_TIMEOUT_MS: '1500' });
  let session: string;
  ({ app, session } = await dashboardApp(ctx));
  client = dashboardClient(app, session);
  ({ projectId } = await seedProject(ctx.services, { fromEmail: 'shop@herald.example' }));
});
afterAll(async () => {
  await app?.close();
  await ctx?.close();
  await sink?.stop();
});

describe(`the SMTP checks through Herald's relay (${backend})`, () => {
  it('are offered, and say which relay they check', async () => {
    const page = await client.get(`/projects/${projectId}/smtp`);
    expect(page.body).toContain('data-testid="smtp-checks-global"');
    expect(page.body).not.toContain('data-testid="smtp-checks-disabled"');
    expect(page.body).not.toMatch(/<button type="submit" class="btn" disabled/);
  });

  it("verify Herald's relay", async () => {
    const page = await client.get(`/projects/${projectId}/smtp`);
    const verified = await client.post(`/projects/${projectId}/smtp/verify`, {}, csrfOf(page));
    expect(verified.body).toContain('Connection verified');
    expect(verified.body).toContain(`Connected to smtp://127.0.0.1:${sink.port}`);
  });

  it("send the test email through Herald's relay", async () => {
    const page = await client.get(`/projects/${projectId}/smtp`);
    const sent = await client.post(
      `/projects/${projectId}/smtp/test`,
      { to: 'dev@example.org' },
      csrfOf(page),
    );
    expect(sent.body).toContain('Test email accepted');
    await sink.waitFor(1);
    expect(sink.messages.at(-1)).toMatchObject({ envelopeTo: ['dev@example.org'] });
    expect(sink.messages.at(-1)?.parsed.subject).toMatch(/^Herald test email for /);
  });

  it('says whether the recipient was left out or is not an email address', async () => {
    const page = await client.get(`/projects/${projectId}/smtp`);
    const empty = await client.post(`/projects/${projectId}/smtp/test`, { to: ' ' }, csrfOf(page));
    expect(empty.body).toContain('No recipient');
    for (const to of ['not an email', 'a@b.example, c@d.example']) {
      const wrong = await client.post(`/projects/${projectId}/smtp/test`, { to }, csrfOf(page));
      expect(wrong.body).toContain('The recipient is not an email address');
      expect(wrong.body).not.toContain('No recipient');
    }
  });
});

describe(`the SMTP page's test email to a relay that is not there (${backend})`, () => {
  it('says that it was not sent because the relay was not reached, not that the relay refused it', async () => {
    const closed = await new SmtpSink().start();
    await closed.stop();
    const { projectId: own } = await seedProject(ctx.services, { fromEmail: 'shop@herald.example' });
    await ctx.services.smtpSettings.setFromUrl(own, closed.url);
    const page = await client.get(`/projects/${own}/smtp`);
    const sent = await client.post(`/projects/${own}/smtp/test`, { to: 'dev@example.org' }, csrfOf(page));
    expect(sent.body).toContain('Test email not sent: the relay was not reached');
    expect(sent.body).toContain(`The relay at 127.0.0.1:${closed.port} refused the connection`);
    expect(sent.body).not.toContain('Test email refused');
  });
});

describe(`the SMTP page's test email to a relay that never confirms it (${backend})`, () => {
  it('says that it was not confirmed, not that the relay refused it', async () => {
    const silent = new SMTPServer({
      // Its connections hold unread data: close them at once, not after 30 s.
      closeTimeout: 50,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData: (stream) => stream.resume(),
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const port = (silent.server.address() as { port: number }).port;
      const { projectId: own } = await seedProject(ctx.services, { fromEmail: 'shop@herald.example' });
      await ctx.services.smtpSettings.setFromUrl(own, `smtp://127.0.0.1:${port}?security=none`);
      const page = await client.get(`/projects/${own}/smtp`);
      const sent = await client.post(`/projects/${own}/smtp/test`, { to: 'dev@example.org' }, csrfOf(page));
      expect(sent.body).toContain('Test email not confirmed by the relay');
      expect(sent.body).toContain('it may have been delivered');
    } finally {
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
