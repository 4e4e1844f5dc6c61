import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { apiSend, createFirstAdmin, reloadUntil, startHarness, type DashboardHarness } from './harness.js';

const PAYLOAD = '<img src=x onerror=alert(1)>';
const PATH_PAYLOAD = '<svg/onload=alert(3)>';
const SCRIPT = '<script>alert(2)</script>';

let h: DashboardHarness;
let sink: SmtpSink;
let page: Page;
let projectId: number;
const dialogs: string[] = [];

beforeAll(async () => {
  [h, sink] = await Promise.all([startHarness(), new SmtpSink().start()]);
  ({ page } = await h.newPage());
  // Any alert(), in the page or in a frame, is a script the dashboard let run.
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await createFirstAdmin(page, h.setupUrl);
});
afterAll(async () => {
  await h?.close();
  await sink?.stop();
});

/** The payload is on the page as visible text, and no element was made from it. */
async function expectInert(target: Page, text = PAYLOAD): Promise<void> {
  await target.getByText(text).first().waitFor();
  expect(await target.locator('img[src="x"]').count()).toBe(0);
  expect(await target.locator('main script').count()).toBe(0);
}

describe('XSS: every logged or stored value shows as text and never runs', () => {
  let requestId = '';

  beforeAll(async () => {
    const { services } = h.server;
    sink.rejectRecipients.set('victim@example.org', [550, `5.1.1 ${PAYLOAD} mailbox unavailable`]);
    const { project, apiKey } = await services.projects.create({
      name: 'xss-lab',
      fromEmail: 'lab@example.org',
    });
    projectId = project.id;
    await services.smtpSettings.set(project.id, { host: '127.0.0.1', port: sink.port, security: 'none' });
    await services.templates.create(project.id, {
      name: 'evil',
      subject: `${SCRIPT} Hi {{name}}`,
      text: `${PAYLOAD} Hello {{name}}`,
      html: `<p>${PAYLOAD}${SCRIPT}{{{name}}} {{name}}</p>`,
    });
    const sent = await apiSend(h.url, apiKey, {
      template: 'evil',
      to: `"${PAYLOAD}" <victim@example.org>`,
      data: { name: PAYLOAD },
    });
    expect(sent.status).toBe(202);
    requestId = String(sent.body.request_id);
    // A request whose logged path carries raw markup (fetch would percent-encode it; http does not).
    await new Promise<void>((resolve, reject) => {
      const target = new URL(h.url);
      httpRequest(
        {
          host: target.hostname,
          port: target.port,
          path: `/api/v1/notifications/x/${PATH_PAYLOAD}`,
          headers: { authorization: `Bearer ${apiKey}` },
        },
        (response) => response.resume().on('end', resolve),
      )
        .on('error', reject)
        .end();
    });
  });

  it('delivery log and message page: recipient name, subject, body, data and SMTP reply', async () => {
    await page.goto(`/messages?project=${projectId}`);
    const row = page.getByTestId('messages').locator('tbody tr').first();
    await reloadUntil(page, async () => (await row.locator('.badge.failed').count()) > 0, 'the rejection');
    await expectInert(page);
    expect(await row.innerText()).toContain(`"${PAYLOAD}" <victim@example.org>`);
    expect(await row.innerText()).toContain(`SMTP 550 5.1.1 ${PAYLOAD} mailbox unavailable`);

    await page.goto(`/messages/${requestId}`);
    await expectInert(page);
    expect(await page.getByTestId('rendered-subject').innerText()).toBe(`${SCRIPT} Hi ${PAYLOAD}`);
    expect(await page.getByTestId('rendered-text').innerText()).toBe(`${PAYLOAD} Hello ${PAYLOAD}`);
    expect(await page.getByTestId('attempt-reply').innerText()).toContain(PAYLOAD);
    expect(await page.getByTestId('request-data').innerText()).toContain(JSON.stringify(PAYLOAD));
    // The HTML part (with a raw {{{name}}}) is only in a sandboxed srcdoc frame, where nothing runs.
    const frame = page.locator('iframe.preview-html');
    expect(await frame.getAttribute('sandbox')).toBe('');
    expect(await frame.getAttribute('srcdoc')).toContain(SCRIPT);
  });

  it('template list, editor and live preview', async () => {
    await page.goto(`/projects/${projectId}/templates`);
    await expectInert(page, `${SCRIPT} Hi {{name}}`);
    await page.goto(`/projects/${projectId}/templates/edit/evil`);
    expect(await page.getByLabel('Subject').inputValue()).toBe(`${SCRIPT} Hi {{name}}`);
    await page.getByLabel('Sample data (JSON)').fill(JSON.stringify({ name: PAYLOAD }));
    await page
      .getByTestId('preview-subject')
      .filter({ hasText: `Hi ${PAYLOAD}` })
      .waitFor();
    await expectInert(page);
  });

  it('API log: a path carrying markup', async () => {
    await page.goto('/api-logs?status=404');
    await reloadUntil(
      page,
      async () => (await page.getByText(PATH_PAYLOAD, { exact: false }).count()) > 0,
      'log',
    );
    await expectInert(page, `/api/v1/notifications/x/${PATH_PAYLOAD}`);
    expect(await page.locator('svg[onload]').count()).toBe(0);
  });

  it('SMTP test email: the relay reply is shown as text', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    await page.getByLabel('Send a test email to').fill('victim@example.org');
    await page.getByRole('button', { name: 'Send test email' }).click();
    await page.getByTestId('smtp-result').filter({ hasText: 'Test email refused' }).waitFor();
    expect(await page.getByTestId('smtp-result').innerText()).toContain(PAYLOAD);
    await expectInert(page);
  });

  it('no dialog fired on any page, and the pages carry a strict CSP', async () => {
    expect(dialogs).toEqual([]);
    const response = await page.goto('/projects');
    const headers = response!.headers();
    const csp = headers['content-security-policy']!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('same-origin');
  });
});

describe('CSRF: state-changing requests without the session token are refused', () => {
  let evil: Server;
  let evilUrl = '';

  beforeAll(async () => {
    // Another origin (another port) serving a page that posts a form to the dashboard by itself.
    evil = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><form method="post" action="${h.url}/projects">
        <input name="name" value="forged-from-elsewhere"></form>
        <script>document.forms[0].submit()</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((resolve) => evil.close(() => resolve())));

  it('refuses a form posted from another origin page with 403', async () => {
    const { context, page: victim } = await h.newPage();
    await context.addCookies(await page.context().cookies());
    const refused = victim.waitForResponse(
      (r) => r.url() === `${h.url}/projects` && r.request().method() === 'POST',
    );
    await victim.goto(evilUrl);
    expect((await refused).status()).toBe(403);
    await victim.getByText('did not come from the dashboard').waitFor();
    await context.close();
  });

  it('refuses a direct request with the session cookie but no or a wrong token with 403', async () => {
    const noToken = await page.request.post('/projects', { form: { name: 'forged-no-token' } });
    expect(noToken.status()).toBe(403);
    const wrong = await page.request.post('/projects', {
      form: { name: 'forged-wrong', _csrf: 'x'.repeat(43) },
    });
    expect(wrong.status()).toBe(403);
    const rotate = await page.request.post(`/projects/${projectId}/rotate-key`, { form: { confirm: 'yes' } });
    expect(rotate.status()).toBe(403);
    const logout = await page.request.post('/logout', { form: {} });
    expect(logout.status()).toBe(403);

    // The same request with the page's token (field or htmx header) goes through.
    await page.goto('/projects/new');
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    const ok = await page.request.post('/projects', {
      form: { name: 'made-with-token' },
      headers: { 'x-csrf-token': token },
      maxRedirects: 0,
    });
    expect(ok.status()).toBe(201);

    const names = (await h.server.services.projects.list()).map((p) => p.name);
    expect(names).toContain('made-with-token');
    expect(names.filter((n) => n.startsWith('forged'))).toEqual([]);
  });

  it('refuses a login form posted without its pre-session token', async () => {
    const { context, page: fresh } = await h.newPage();
    const response = await fresh.request.post('/login', {
      form: { email: 'admin@herald.example', password: 'whatever-password' },
    });
    expect(response.status()).toBe(403);
    await context.close();
  });
});
