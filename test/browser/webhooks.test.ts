import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSuppressions } from '../../src/storage/suppressions.js';
import {
  apiSend,
  createFirstAdmin,
  reloadUntil,
  screenshot,
  startHarness,
  unlabelledControls,
  type DashboardHarness,
} from './harness.js';

/**
 * Webhooks and the suppression list in the dashboard, in Chromium against a real Herald (role
 * `all`, so its webhook dispatcher runs) and a real HTTP receiver in this process: an endpoint
 * made through the form, its secret shown once, a test event delivered and signed, its attempts on
 * the deliveries page, hostile URLs and answers shown as text, and suppressions added and removed.
 */

const XSS_SCRIPT = '<script>window.__xss=1</script>';
const XSS_IMG = '"><img src=x onerror=window.__xss=1>';
const HOSTILE_ANSWER = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">';

interface Hit {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly type: string;
}

/** A webhook receiver: `/evil…` answers markup; the first notification.sent gets a 503. */
class Receiver {
  readonly hits: Hit[] = [];
  private readonly server: Server = createServer((req, res) => this.handle(req, res));
  private refusedOnce = false;

  async start(): Promise<this> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === 'string') headers[name] = value;
      const type = String((JSON.parse(body) as { type?: unknown }).type);
      this.hits.push({ path: req.url ?? '', headers, body, type });
      if (req.url?.startsWith('/evil')) {
        res.writeHead(200, { 'content-type': 'text/html' }).end(HOSTILE_ANSWER);
      } else if (type === 'notification.sent' && !this.refusedOnce) {
        this.refusedOnce = true;
        res.writeHead(503, { 'content-type': 'text/plain' }).end('Service Unavailable: deploy in progress');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' }).end(`{"ok":true,"received":"${type}"}`);
      }
    });
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let h: DashboardHarness;
let receiver: Receiver;
let page: Page;
let projectId: number;
let apiKey: string;
const dialogs: string[] = [];

beforeAll(async () => {
  // A fast retry base, so a refused delivery's second attempt comes within the test.
  [h, receiver] = await Promise.all([
    startHarness({ HERALD_WEBHOOK_RETRY_BASE_MS: '300' }),
    new Receiver().start(),
  ]);
  ({ page } = await h.newPage());
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await createFirstAdmin(page, h.setupUrl);
  const { services } = h.server;
  const created = await services.projects.create({
    name: 'shop-production',
    fromEmail: 'noreply@shop.example',
  });
  projectId = created.project.id;
  apiKey = created.apiKey;
  await services.templates.create(projectId, {
    name: 'order_shipped',
    subject: 'Your order {{order}} is on its way',
    text: 'Hello, order {{order}} has shipped.',
  });
});
afterAll(async () => {
  await h?.close();
  await receiver?.stop();
});

/** Creates an endpoint through the form; returns the secret shown once. */
async function addEndpoint(url: string, events: readonly string[] = []): Promise<string> {
  await page.goto(`/projects/${projectId}/webhooks`);
  await page.getByLabel('URL', { exact: true }).fill(url);
  for (const name of events) await page.getByLabel(name).check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.getByText('It is shown only once').waitFor();
  return page.getByLabel('Signing secret').inputValue();
}

async function xssFired(): Promise<unknown> {
  return page.evaluate('window.__xss');
}

describe('webhooks in a real browser', () => {
  let secret = '';
  const hookUrl = () => `${receiver.url}/hooks/herald`;

  it('creates an endpoint through the form and shows its secret once', async () => {
    await page.goto(`/projects/${projectId}`);
    await page
      .getByRole('navigation', { name: 'Project sections' })
      .getByRole('link', { name: 'Webhooks' })
      .click();
    await page.getByText('No webhook endpoints yet').waitFor();
    expect(await unlabelledControls(page)).toEqual([]);

    secret = await addEndpoint(hookUrl());
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(secret);

    const onward = page.getByRole('link', { name: 'I have stored the secret, continue' });
    expect(await onward.getAttribute('href')).toBe(`/projects/${projectId}/webhooks`);
    // A refresh shows the list; it does not post the form again and add the endpoint twice.
    await page.reload();
    expect(await page.getByTestId('endpoint').filter({ hasText: hookUrl() }).count()).toBe(1);
    expect(await page.content()).not.toContain(secret);
    const row = page.getByTestId('endpoint').filter({ hasText: hookUrl() });
    expect(await row.innerText()).toContain('All events');
    expect(await row.innerText()).toContain('enabled');
    expect(await page.content()).not.toContain(secret);
    expect(await page.content()).not.toContain('whsec_');
  });

  it('delivers a test event and a real event to a local receiver, and shows every attempt', async () => {
    const row = page.getByTestId('endpoint').filter({ hasText: hookUrl() });
    await row.getByRole('button', { name: 'Send test event' }).click();
    await page.waitForURL(/notice=test$/);
    // The page follows the pending delivery by itself (htmx), until the answer is in.
    const newest = page.getByTestId('delivery').first();
    await newest.getByTestId('attempt-status').filter({ hasText: '200' }).waitFor({ timeout: 10_000 });
    expect(await newest.getByTestId('delivery-state').innerText()).toBe('succeeded');
    expect(await newest.getByTestId('attempt-excerpt').innerText()).toBe(
      '{"ok":true,"received":"webhook.test"}',
    );
    expect(await page.getByText('Test event queued.').count()).toBe(0);

    // What arrived is signed with the secret shown once, as Standard Webhooks prescribes.
    const test = receiver.hits.find((hit) => hit.type === 'webhook.test')!;
    const verified = new Webhook(secret).verify(test.body, test.headers) as { data: Record<string, unknown> };
    expect(verified.data).toMatchObject({
      message: 'This is a test event from Herald.',
      project: 'shop-production',
    });
    expect(await newest.innerText()).toContain(test.headers['webhook-id']!);

    // A message sent through the API: its notification.sent is refused once (503), then retried.
    const sent = await apiSend(h.url, apiKey, {
      template: 'order_shipped',
      to: 'jane@example.org',
      data: { order: 'A-1042' },
    });
    expect(sent.status).toBe(202);
    const requestId = String(sent.body.request_id);
    const event = page.getByTestId('delivery').filter({ hasText: 'notification.sent' });
    await reloadUntil(page, async () => (await event.count()) > 0, 'the notification.sent delivery');
    await event.getByTestId('attempt-status').filter({ hasText: '200' }).waitFor({ timeout: 10_000 });
    expect(await event.getByTestId('delivery-state').innerText()).toBe('succeeded');
    // Only the newest delivery's attempts are open at first.
    if ((await event.locator('details').getAttribute('open')) === null)
      await event.locator('summary').click();
    const attempts = event.getByTestId('webhook-attempt');
    expect(await attempts.count()).toBe(2);
    expect(await attempts.nth(0).innerText()).toContain('503');
    expect(await attempts.nth(0).innerText()).toContain('Service Unavailable: deploy in progress');
    expect(await attempts.nth(1).innerText()).toMatch(/200[\s\S]* ms/);
    await event.getByRole('link', { name: requestId }).waitFor();

    // Replay: the same event again, with the same webhook-id.
    const hitsBefore = receiver.hits.length;
    await page
      .getByTestId('delivery')
      .filter({ hasText: 'webhook.test' })
      .getByRole('button', { name: /^Replay/ })
      .click();
    await page.waitForURL(/notice=replayed$/);
    await page
      .getByTestId('delivery')
      .first()
      .getByTestId('attempt-status')
      .filter({ hasText: '200' })
      .waitFor({ timeout: 10_000 });
    expect(await page.getByTestId('delivery').count()).toBe(3);
    const replayed = receiver.hits.slice(hitsBefore);
    expect(replayed.map((hit) => hit.headers['webhook-id'])).toEqual([test.headers['webhook-id']]);
    await page.reload();
    // Every delivery's attempts open, for the screenshot.
    const closed = page.locator('details.attempts:not([open]) > summary');
    while ((await closed.count()) > 0) await closed.first().click();
    await screenshot(page, 'webhook-deliveries', true);
    expect(await unlabelledControls(page)).toEqual([]);

    // The request id leads to the message.
    await page.getByRole('link', { name: requestId }).click();
    await page.waitForURL(new RegExp(`/messages/${requestId}`));
  });

  it('lists endpoints with their filters, disables one and deletes one after confirmation', async () => {
    await addEndpoint('https://hooks.example.com/herald/failures', [
      'notification.failed',
      'notification.bounced',
      'notification.complained',
    ]);
    await page.getByRole('link', { name: 'I have stored the secret, continue' }).click();
    const filtered = page.getByTestId('endpoint').filter({ hasText: 'hooks.example.com' });
    expect(await filtered.getByRole('list', { name: 'Events' }).innerText()).toMatch(
      /notification\.failed[\s\S]*notification\.bounced[\s\S]*notification\.complained/,
    );
    await filtered.getByRole('button', { name: 'Disable' }).click();
    await page.getByText('Endpoint disabled.').waitFor();
    expect(await filtered.innerText()).toContain('disabled');
    expect(await filtered.getByRole('button', { name: 'Send test event' }).count()).toBe(0);
    await screenshot(page, 'webhooks', true);

    await addEndpoint('https://staging.example.com/hooks');
    await page.getByRole('link', { name: 'I have stored the secret, continue' }).click();
    const doomed = page.getByTestId('endpoint').filter({ hasText: 'staging.example.com' });
    await doomed.getByRole('button', { name: 'Delete endpoint' }).waitFor({ state: 'hidden' });
    await doomed.getByText('Delete…').click();
    await doomed.getByRole('button', { name: 'Delete endpoint' }).click();
    await page.getByText('Endpoint deleted').waitFor();
    expect(await page.getByTestId('endpoint').count()).toBe(2);
  });

  it('shows hostile URLs and answers as text: no script runs, no dialog opens', async () => {
    // Accepted, and stored as the URL parser writes it (markup in a query is percent-encoded).
    await addEndpoint(`https://x.example/?q=${XSS_SCRIPT}`, ['notification.complained']);
    await page.getByRole('link', { name: 'I have stored the secret, continue' }).click();
    const stored = (await h.server.services.webhooks.list(projectId)).find((e) =>
      e.url.includes('x.example'),
    )!;
    expect(stored.url).toContain('window.__xss=1');
    await page.getByRole('link', { name: stored.url, exact: true }).click();
    expect(await page.getByTestId('endpoint-url').innerText()).toBe(stored.url);
    await page.goto(`/projects/${projectId}/webhooks`);

    // Refused (spaces), and given back in the field exactly as typed.
    await page.getByLabel('URL', { exact: true }).fill(XSS_IMG);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('alert').filter({ hasText: 'Webhook URL must not contain spaces' }).waitFor();
    expect(await page.getByLabel('URL', { exact: true }).inputValue()).toBe(XSS_IMG);
    expect(await page.locator('img[src="x"]').count()).toBe(0);

    // A receiver whose answer is markup, at a URL that carries some too.
    const evil = `${receiver.url}/evil/${XSS_IMG.replaceAll(' ', '/')}`;
    await addEndpoint(evil, ['notification.complained']);
    await page.getByRole('link', { name: 'Open the endpoint to send a test event' }).click();
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.waitForURL(/notice=test$/);
    const excerpt = page.getByTestId('delivery').first().getByTestId('attempt-excerpt');
    await excerpt.waitFor({ timeout: 10_000 });
    expect(await excerpt.innerText()).toBe(HOSTILE_ANSWER);
    await page.getByText(HOSTILE_ANSWER).waitFor();
    expect(await page.getByTestId('endpoint-url').innerText()).toContain('/evil/');
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.locator('main script').count()).toBe(0);
    await page.goto(`/projects/${projectId}/webhooks`);
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await xssFired()).toBeUndefined();
    expect(dialogs).toEqual([]);
  });
});

describe('suppressions in a real browser', () => {
  it('adds and removes an address through the page', async () => {
    const { services } = h.server;
    const bounced = await apiSend(h.url, apiKey, {
      template: 'order_shipped',
      to: 'old-mailbox@example.com',
    });
    const now = Date.now();
    await addSuppressions(services.storage.db, [
      {
        projectId,
        email: 'old-mailbox@example.com',
        reason: 'hard_bounce',
        requestId: String(bounced.body.request_id),
        detail: 'SMTP 550 5.1.1 <old-mailbox@example.com>: Recipient address rejected: User unknown',
        now: now - 3 * 3_600_000,
      },
      {
        projectId,
        email: 'sam@example.net',
        reason: 'complaint',
        requestId: null,
        detail: 'abuse',
        now: now - 26 * 3_600_000,
      },
    ]);

    await page.goto(`/projects/${projectId}`);
    await page
      .getByRole('navigation', { name: 'Project sections' })
      .getByRole('link', { name: 'Suppressions' })
      .click();
    await page.getByTestId('suppressions').waitFor();
    expect(await unlabelledControls(page)).toEqual([]);

    await page.getByLabel('Email address').fill('not-an-address');
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByRole('alert').filter({ hasText: 'Not an email address' }).waitFor();
    expect(await page.getByLabel('Email address').inputValue()).toBe('not-an-address');

    await page.getByLabel('Email address').fill('Jane.Doe@Example.org');
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByText('Address added to the suppression list').waitFor();
    const rows = page.getByTestId('suppression');
    expect(await rows.count()).toBe(3);
    expect(await rows.first().innerText()).toMatch(/jane\.doe@example\.org\s+manual/);
    await screenshot(page, 'suppressions', true);

    await page.getByRole('button', { name: 'Remove jane.doe@example.org' }).click();
    await page.getByText('Address removed from the suppression list').waitFor();
    expect(await rows.count()).toBe(2);
    expect(await page.getByTestId('suppressions').innerText()).not.toContain('jane.doe@example.org');
    expect(await services.suppressions.list(projectId)).toHaveLength(2);

    // A detail with markup (a bounce's diagnostic is the remote server's text) shows as text.
    await addSuppressions(services.storage.db, [
      { projectId, email: 'x@example.org', reason: 'hard_bounce', requestId: null, detail: XSS_IMG, now },
    ]);
    await page.reload();
    await page.getByText(XSS_IMG).waitFor();
    expect(await page.locator('img[src="x"]').count()).toBe(0);

    await page.getByTestId('suppression').filter({ hasText: 'old-mailbox' }).getByRole('link').click();
    await page.waitForURL(new RegExp(`/messages/${String(bounced.body.request_id)}`));
    expect(await xssFired()).toBeUndefined();
    expect(dialogs).toEqual([]);
  });
});
