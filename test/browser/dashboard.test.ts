import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcceptService } from '../../src/services/accept.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import {
  ADMIN,
  apiSend,
  createFirstAdmin,
  reloadUntil,
  screenshot,
  startHarness,
  unlabelledControls,
  type DashboardHarness,
} from './harness.js';

let h: DashboardHarness;
let sink: SmtpSink;
let page: Page;

beforeAll(async () => {
  [h, sink] = await Promise.all([startHarness(), new SmtpSink().start()]);
  ({ page } = await h.newPage());
});
afterAll(async () => {
  await h?.close();
  await sink?.stop();
});

/**
 * Fills two weeks of history (backdated accepts, delivered by the running worker) so the usage
 * chart and its screenshot show traffic over time, not a single bar.
 */
async function seedHistory(projectName: string): Promise<void> {
  const { services } = h.server;
  const project = await services.projects.resolve(projectName);
  const day = 86_400_000;
  const names = [
    'Ada',
    'Grace',
    'Linus',
    'Margaret',
    'Ken',
    'Barbara',
    'Dennis',
    'Frances',
    'Alan',
    'Radia',
    'Edsger',
  ];
  // One service whose clock the loop moves: accept() reads the clock when called, so every message
  // gets its own time while all of them share one group commit.
  let clock = 0;
  const backdated = new AcceptService(services.storage, () => clock);
  const sends: Promise<unknown>[] = [];
  for (let back = 13; back >= 1; back--) {
    const count = 3 + ((back * 7) % 9);
    for (let i = 0; i < count; i++) {
      clock = Date.now() - back * day + i * 47 * 60_000;
      const name = names[(back + i) % names.length]!;
      sends.push(
        backdated.accept({
          project,
          sends: {
            template: back % 4 === 0 && i === 0 ? 'password_reset' : 'user_created',
            to: { name, address: `${name.toLowerCase()}@example.org` },
            data: { user_name: name, role: i % 3 === 0 ? 'admin' : 'member' },
            type: 'email',
            sendAt: null,
          },
        }),
      );
    }
  }
  await Promise.all(sends);
  await waitUntil(
    async () => ((await services.notifications.counts(project.id)).queued === 0 ? true : undefined),
    {
      what: 'seeded history delivered',
    },
  );
}

describe('dashboard journey in a real browser', () => {
  let apiKey = '';
  let projectId = '';
  let requestId = '';

  it('prints a setup link that creates the first admin once', async () => {
    expect(h.setupUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/setup\/[A-Za-z0-9_-]{43}$/);
    expect(h.logLines.some((line) => line.includes(h.setupUrl) && line.includes('"level":30'))).toBe(true);
    await createFirstAdmin(page, h.setupUrl);
    await expect(page.getByText('Welcome to Herald').isVisible()).resolves.toBe(true);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'herald_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax' });

    // The link is used up.
    const again = await page.goto(h.setupUrl);
    expect(again?.status()).toBe(404);
  });

  it('creates a project and shows its key once, with a copy button', async () => {
    await page.goto('/projects');
    await page.getByRole('link', { name: 'New project' }).click();
    await page.getByLabel('Name', { exact: true }).fill('shop-production');
    await page.getByLabel('Contact email').fill('ops@shop.example');
    await page.getByLabel('From name').fill('Shop');
    await page.getByLabel('From email').fill('noreply@shop.example');
    await page.getByLabel('Quota (accepted requests)').fill('500');
    await page.getByLabel('Per', { exact: true }).selectOption('month');
    await page.getByRole('button', { name: 'Create project' }).click();

    await expect(page.getByText('It is shown only once').isVisible()).resolves.toBe(true);
    apiKey = await page.getByLabel('API key').inputValue();
    expect(apiKey).toMatch(/^hrl_[0-9A-Za-z]{38}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(apiKey);
    await screenshot(page, 'project-key');

    await page.getByRole('link', { name: 'I have stored the key, continue' }).click();
    projectId = /\/projects\/(\d+)/.exec(page.url())![1]!;
    // Afterwards only the prefix is shown, never the key.
    expect(await page.content()).not.toContain(apiKey);
    expect(await page.content()).toContain(apiKey.slice(0, 12));
    await expect(page.getByText('Capture mode.').isVisible()).resolves.toBe(true);
  });

  it('creates a template with a live preview', async () => {
    await page
      .getByRole('navigation', { name: 'Project sections' })
      .getByRole('link', { name: 'Templates' })
      .click();
    await page.getByRole('link', { name: 'New template' }).first().click();
    await page.getByLabel('Name', { exact: true }).fill('user_created');
    await page.getByLabel('Subject').fill('Welcome to Shop, {{user_name}}');
    await page
      .getByLabel('Text body')
      .fill('Hello {{user_name}},\n\nYour role is {{role}}.\n\nThe Shop team');
    await page
      .getByLabel('HTML body')
      .fill('<h1 style="color:#4338ca">Hello {{user_name}}</h1><p>Your role is <b>{{role}}</b>.</p>');
    await page.getByLabel('Sample data (JSON)').fill('{"user_name": "Jane", "role": "admin"}');

    // htmx posts the form as the user types and swaps in the rendered preview.
    await page.getByTestId('preview-subject').filter({ hasText: 'Welcome to Shop, Jane' }).waitFor();
    await page.getByTestId('preview-text').filter({ hasText: 'Your role is admin.' }).waitFor();
    const frame = page.frameLocator('iframe[data-testid="preview-html"]');
    await frame.locator('h1', { hasText: 'Hello Jane' }).waitFor();
    expect(await page.locator('iframe[data-testid="preview-html"]').getAttribute('sandbox')).toBe('');
    const placeholders = await page.getByRole('list', { name: 'Placeholders' }).innerText();
    expect(placeholders).toContain('{{user_name}}');
    expect(placeholders).toContain('{{role}}');
    await page.getByRole('heading', { name: 'New template' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'template-editor', true);
    expect(await unlabelledControls(page)).toEqual([]);

    await page.getByRole('button', { name: 'Create template' }).click();
    await page.getByText('Template created.').waitFor();
  });

  it('shows a message sent through the real API as sent, and its request in the API log', async () => {
    await seedHistory('shop-production');
    const sent = await apiSend(h.url, apiKey, {
      template: 'user_created',
      to: 'Jane Doe <jane@example.org>',
      data: { user_name: 'Jane', role: 'admin' },
    });
    expect(sent.status).toBe(202);
    requestId = String(sent.body.request_id);

    await page.goto('/messages');
    const row = page.getByTestId('messages').locator('tr', { hasText: 'jane@example.org' });
    await reloadUntil(page, async () => (await row.locator('.badge.sent').count()) > 0, 'the message sent');
    await screenshot(page, 'delivery-log');
    expect(await unlabelledControls(page)).toEqual([]);

    // Keyset pages of 50: the second page starts below the first page's last id.
    const firstPage = await page.getByTestId('messages').locator('tbody tr').count();
    expect(firstPage).toBe(50);
    const lastOnFirst = await page.getByTestId('messages').locator('tbody tr').last().innerText();
    await page.getByRole('link', { name: 'Older »' }).click();
    await page.getByRole('link', { name: '« Newest' }).waitFor();
    expect(await page.getByTestId('messages').innerText()).not.toContain(lastOnFirst);

    // Filters: by status and recipient.
    await page.goto(`/messages?project=${projectId}&status=failed`);
    expect(await page.getByTestId('messages').innerText()).toContain('Template not found');
    expect(await page.getByTestId('messages').innerText()).not.toContain('user_created');
    await page.goto('/messages?recipient=jane%40example');
    expect(await page.getByTestId('messages').locator('tbody tr').count()).toBe(1);

    await page.getByTestId('messages').getByRole('link').first().click();
    await page.waitForURL(new RegExp(`/messages/${requestId}`));
    expect(await page.getByTestId('message-status').innerText()).toBe('sent');
    expect(await page.getByTestId('rendered-subject').innerText()).toBe('Welcome to Shop, Jane');
    await page.frameLocator('iframe.preview-html').locator('h1', { hasText: 'Hello Jane' }).waitFor();
    await screenshot(page, 'message-detail', true);

    // A few more requests of other outcomes, for the log and its status filter.
    const headers = { authorization: `Bearer ${apiKey}` };
    expect((await fetch(`${h.url}/api/v1/notifications/${requestId}`, { headers })).status).toBe(200);
    expect((await apiSend(h.url, apiKey, { to: 'jane@example.org' })).status).toBe(400);
    // Another key: its last character changed (to one it is not, so never the same key by chance).
    const wrongKey = `${apiKey.slice(0, -1)}${apiKey.endsWith('X') ? 'Y' : 'X'}`;
    expect(wrongKey).not.toBe(apiKey);
    expect((await apiSend(h.url, wrongKey, { template: 'user_created' })).status).toBe(401);
    expect((await fetch(`${h.url}/api/v1/notifications/unknown-id`, { headers })).status).toBe(404);
    await page.goto('/api-logs?status=401');
    await reloadUntil(page, async () => (await page.getByTestId('api-logs').count()) > 0, 'the 401 entry');
    expect(await page.getByTestId('api-logs').locator('tbody tr').count()).toBe(1);
    expect(await page.getByTestId('api-logs').innerText()).toContain('Invalid or missing API key');
    // A lookup of a message that does not exist names the id it asked for, with no link to it.
    await page.goto('/api-logs?status=404');
    await reloadUntil(page, async () => (await page.getByTestId('api-logs').count()) > 0, 'the 404 entry');
    const lookup = page.getByTestId('api-logs').locator('tr', { hasText: 'unknown-id' });
    expect(await lookup.innerText()).toContain('unknown-…');
    expect(await lookup.getByRole('link', { name: /unknown/ }).count()).toBe(0);

    await page.goto('/api-logs');
    const logRow = page
      .getByTestId('api-logs')
      .locator('tr', { hasText: 'POST /api/v1/notifications' })
      .last();
    await reloadUntil(page, async () => (await logRow.count()) > 0, 'the API log entry');
    const text = await logRow.innerText();
    expect(text).toContain('POST');
    expect(text).toContain('202');
    expect(text).toContain(apiKey.slice(0, 12));
    await screenshot(page, 'api-log');
    expect(await unlabelledControls(page)).toEqual([]);
    await logRow.getByRole('link', { name: /…$/ }).last().click();
    await page.waitForURL(new RegExp(`/messages/${requestId}`));
  });

  it('finds a message by its metadata and lists its files on its page', async () => {
    const sent = await apiSend(h.url, apiKey, {
      template: 'user_created',
      to: 'Sam Roe <sam@example.org>',
      data: { user_name: 'Sam', role: 'member' },
      reply_to: 'Billing <billing@shop.example>',
      metadata: { order_id: 'o-77', channel: 'web' },
      attachments: [
        { filename: 'Invoice o-77.pdf', content: Buffer.alloc(3 * 1024, 1).toString('base64') },
        {
          filename: 'Reçu (copie).txt',
          content: Buffer.from('merci').toString('base64'),
          content_type: 'text/plain',
        },
      ],
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    const sentId = String(sent.body.request_id);

    await page.goto('/messages');
    await page.getByLabel('Metadata').fill('order_id=o-77');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/metadata=order_id%3Do-77/);
    const rows = page.getByTestId('messages').locator('tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().innerText()).toContain('sam@example.org');
    expect(await page.getByLabel('Metadata').inputValue()).toBe('order_id=o-77');
    expect(await unlabelledControls(page)).toEqual([]);

    await rows.first().getByRole('link').first().click();
    await page.waitForURL(new RegExp(`/messages/${sentId}`));
    const files = page.getByTestId('attachments');
    expect(await files.locator('tbody tr').allInnerTexts()).toEqual([
      'Invoice o-77.pdf\tapplication/pdf\t3.0 KiB',
      'Reçu (copie).txt\ttext/plain\t5 B',
    ]);
    expect(await page.getByTestId('reply-to').innerText()).toBe('"Billing" <billing@shop.example>');
    expect(await page.getByTestId('metadata').innerText()).toBe('order_id=o-77 · channel=web');
    await screenshot(page, 'message-attachments', true);

    // Each value leads back to the log, filtered on it.
    await page.getByTestId('metadata').getByRole('link', { name: 'channel=web' }).click();
    await page.waitForURL(/metadata\.channel=web/);
    expect(await page.getByTestId('messages').locator('tbody tr').count()).toBe(1);
  });

  it('saves SMTP settings, verifies them and sends test emails through them', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    await expect(page.getByText('Capture mode.').isVisible()).resolves.toBe(true);
    // User and password side by side, their boxes on one line.
    const top = async (label: string) => (await page.getByLabel(label, { exact: true }).boundingBox())?.y;
    expect(await top('Password')).toBe(await top('User optional'));
    await page.getByLabel('Host').fill('127.0.0.1');
    await page.getByLabel('Port').fill(String(sink.port));
    await page.getByLabel('Security').selectOption('none');
    await page.getByLabel('Password', { exact: true }).fill('s3cret-smtp-pass');
    await page.getByRole('button', { name: 'Save SMTP settings' }).click();
    await page.getByText('SMTP settings saved.').waitFor();
    // The password is write-only: it never comes back to the browser.
    expect(await page.content()).not.toContain('s3cret-smtp-pass');
    expect(await page.getByLabel('Password', { exact: true }).inputValue()).toBe('');

    await page.getByRole('button', { name: 'Verify connection' }).click();
    await page.getByTestId('smtp-result').filter({ hasText: 'Connection verified' }).waitFor();
    await page.getByLabel('Send a test email to').fill('ops@shop.example');
    await page.getByRole('button', { name: 'Send test email' }).click();
    await page.getByTestId('smtp-result').filter({ hasText: 'Test email accepted' }).waitFor();
    expect(await page.getByTestId('smtp-result').innerText()).toMatch(/250/);
    await sink.waitFor(1);
    await screenshot(page, 'smtp-settings');
    expect(await unlabelledControls(page)).toEqual([]);

    // A template's test email goes through the queue and the worker to the relay.
    await page.goto(`/projects/${projectId}/templates/edit/user_created`);
    await page.getByLabel('Recipient').fill('tester@shop.example');
    await page.getByRole('button', { name: 'Send test email' }).click();
    await page.waitForURL(/\/messages\/[0-9a-f-]{36}/);
    await page.getByTestId('message-status').filter({ hasText: 'sent' }).waitFor({ timeout: 10_000 });
    await sink.waitFor(2);
    // The test email uses the sample data typed when the template was created, which the editor
    // keeps with the template.
    expect(sink.messages[1]!.parsed.subject).toBe('Welcome to Shop, Jane');
  });

  it('draws usage against the quota', async () => {
    await page.goto(`/projects/${projectId}/usage?range=14d`);
    expect(await page.locator('[data-testid="usage-chart"] rect.seg.sent').count()).toBeGreaterThan(10);
    expect(await page.locator('[data-testid="usage-chart"] rect.seg.failed').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('quota-meter').getAttribute('aria-label')).toMatch(/of 500 requests used/);
    await screenshot(page, 'usage', true);
  });

  it('regenerates the key: the new one is shown once and the old one gets 401 at once', async () => {
    await page.goto(`/projects/${projectId}`);
    await page.getByText('Regenerate key…').click();
    await page.getByLabel('I understand the current key stops working now').check();
    await page.getByRole('button', { name: 'Regenerate key' }).click();
    await page.getByText('The previous key has already stopped working.').waitFor();
    const newKey = await page.getByLabel('API key').inputValue();
    expect(newKey).not.toBe(apiKey);

    const old = await apiSend(h.url, apiKey, { template: 'user_created', to: 'jane@example.org' });
    expect(old).toEqual({ status: 401, body: { error: 'Invalid or missing API key' } });
    const fresh = await apiSend(h.url, newKey, { template: 'user_created', to: 'jane@example.org' });
    expect(fresh.status).toBe(202);

    await h.server.services.projects.create({
      name: 'shop-staging',
      fromEmail: 'noreply@staging.shop.example',
      quotaLimit: null,
    });
    await page.goto('/projects');
    const row = page.locator('tr', { hasText: 'shop-production' });
    expect(await row.innerText()).toContain(newKey.slice(0, 12));
    expect(await row.innerText()).toMatch(/\/ 500/);
    await screenshot(page, 'projects');
    for (const path of [`/projects/${projectId}`, '/projects/new', '/admins', '/account']) {
      await page.goto(path);
      expect({ path, unlabelled: await unlabelledControls(page) }).toEqual({ path, unlabelled: [] });
    }
  });

  it('is readable on a 390 px phone screen', async () => {
    const { context, page: phone } = await h.newPage({ width: 390, height: 844 });
    await context.addCookies(await page.context().cookies());
    await phone.goto(`/messages/${requestId}`);
    const overflow = await phone.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(phone, 'message-detail-390');
    await context.close();
  });

  it('keeps times and addresses whole on a 375 px screen, where a table scrolls', async () => {
    const { context, page: phone } = await h.newPage({ width: 375, height: 812 });
    await context.addCookies(await page.context().cookies());
    /** How many lines an element's text takes. */
    const linesOf = (selector: string) =>
      phone
        .locator(selector)
        .first()
        .evaluate((element) => {
          const range = element.ownerDocument.createRange();
          range.selectNodeContents(element);
          return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
        });
    await phone.goto(`/projects/${projectId}`);
    expect(await linesOf('table.table tbody td:first-child a')).toBe(1);
    const scrolls = await phone
      .locator('.table-wrap')
      .first()
      .evaluate((wrap) => wrap.scrollWidth > wrap.clientWidth);
    expect(scrolls).toBe(true);
    await screenshot(phone, 'project-375');
    await phone.goto('/projects');
    // noreply@staging.shop.example: one line, not pieces of a few characters.
    expect(await linesOf('table.table tbody td:first-child .muted')).toBe(1);
    await screenshot(phone, 'projects-375');
    await context.close();
  });

  it('logs out, and logs in again with a new session id', async () => {
    const before = (await page.context().cookies()).find((c) => c.name === 'herald_session')!.value;
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/login/);
    await page.goto('/projects');
    await page.waitForURL(/\/login\?next=%2Fprojects/);
    await page.getByLabel('Email').fill(ADMIN.email);
    await page.getByLabel('Password').fill('wrong password!');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByText('Email or password is not correct.').waitFor();
    await page.getByLabel('Password').fill(ADMIN.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(/\/projects$/);
    const after = (await page.context().cookies()).find((c) => c.name === 'herald_session')!.value;
    expect(after).not.toBe(before);
  });
});
