import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { apiSend, createFirstAdmin, reloadUntil, startHarness, type DashboardHarness } from './harness.js';

/** A newcomer's first SMTP settings page, in Chromium: why the checks wait, which fields are optional. */

let h: DashboardHarness;
let sink: SmtpSink;
let page: Page;
let projectId: number;
let apiKey: string;

beforeAll(async () => {
  [h, sink] = await Promise.all([startHarness(), new SmtpSink().start()]);
  ({ page } = await h.newPage());
  await createFirstAdmin(page, h.setupUrl);
  const { project, apiKey: key } = await h.server.services.projects.create({
    name: 'paper-cuts',
    contactEmail: null,
    fromEmail: 'noreply@herald.example',
    quotaLimit: null,
  });
  projectId = project.id;
  apiKey = key;
});
afterAll(async () => {
  await h?.close();
  await sink?.stop();
});

/** The text of the elements that describe the element at `selector` (aria-describedby). */
function describedBy(selector: string): Promise<string> {
  return page.evaluate<string>(`(() => {
    const el = document.querySelector(${JSON.stringify(selector)});
    return (el.getAttribute('aria-describedby') || '').split(' ')
      .map((id) => (document.getElementById(id) || {}).textContent || '').join(' ');
  })()`);
}

describe('SMTP settings page', () => {
  it('says why Verify and Send test are disabled before anything is saved, and enables them after', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    const verify = page.getByRole('button', { name: 'Verify connection' });
    const test = page.getByRole('button', { name: 'Send test email' });
    expect(await verify.isDisabled()).toBe(true);
    expect(await test.isDisabled()).toBe(true);
    const reason = page.getByTestId('smtp-checks-disabled');
    expect(await reason.isVisible()).toBe(true);
    expect(await reason.innerText()).toMatch(/Save the settings above first/);
    // The reason is tied to the buttons, so a screen reader says it too.
    for (const form of ['verify', 'test']) {
      expect(await describedBy(`form[action$="/smtp/${form}"] button`)).toMatch(
        /Save the settings above first/,
      );
    }

    await page.getByLabel('Host').fill('127.0.0.1');
    await page.getByLabel('Port').fill(String(sink.port));
    await page.getByLabel('Security').selectOption('none');
    await page.getByRole('button', { name: 'Save SMTP settings' }).click();
    await page.getByText('SMTP settings saved.').waitFor();
    expect(await verify.isEnabled()).toBe(true);
    expect(await test.isEnabled()).toBe(true);
    expect(await page.getByTestId('smtp-checks-disabled').count()).toBe(0);
  });

  it('marks the password as optional, like the user name', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    expect(await page.getByLabel('Password', { exact: true }).count()).toBe(1);
    const description = await describedBy('#password');
    expect(description).toMatch(/^optional\b/);
    expect(await page.locator('#password-optional').isVisible()).toBe(true);
  });
});

describe('message page after a test email', () => {
  it('drops the "Test email queued" notice once the message was sent', async () => {
    await h.server.services.templates.create(projectId, {
      name: 'welcome',
      subject: 'Welcome {{name}}',
      text: 'Hello {{name}}',
    });
    await page.goto(`/projects/${projectId}/templates/edit/welcome`);
    await page.getByLabel('Recipient').fill('jane@example.org');
    await page.getByRole('button', { name: 'Send test email' }).click();
    await page.waitForURL(/\/messages\/[^/?]+/);
    const requestId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await waitUntil(
      async () =>
        (await h.server.services.notifications.status(projectId, requestId)).status === 'sent'
          ? true
          : undefined,
      { timeoutMs: 8_000, intervalMs: 100, what: 'the test email to be sent' },
    );
    // Either the page loaded after delivery, or its next refresh (every 2 s) removes the notice.
    await page.getByText('Test email queued').waitFor({ state: 'detached', timeout: 8_000 });
    await page.reload();
    expect(await page.getByText('Test email queued').count()).toBe(0);
  });
});

describe('message page of a scheduled message', () => {
  it('takes its cancel control away once a refresh shows it canceled elsewhere', async () => {
    await h.server.services.templates.create(projectId, { name: 'later', subject: 'Later', text: 'Later' });
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const queued = await apiSend(h.url, apiKey, { template: 'later', to: 'jane@example.org', send_at: at });
    expect(queued.status).toBe(202);
    const requestId = queued.body.request_id as string;
    await page.goto(`/messages/${encodeURIComponent(requestId)}`);
    expect(await page.getByTestId('cancel-message').count()).toBe(1);

    const canceled = await fetch(`${h.url}/api/v1/notifications/${encodeURIComponent(requestId)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(canceled.status).toBe(200);
    // The next poll (every 2 s) shows it canceled, and the control that would answer 409 goes.
    await page.getByTestId('canceled').waitFor({ timeout: 10_000 });
    await page.getByTestId('cancel-message').waitFor({ state: 'detached', timeout: 5_000 });
  });
});

describe('a message whose template or data did not match', () => {
  it('names the closest template and offers to create the missing one with its name filled in', async () => {
    await h.server.services.templates.create(projectId, {
      name: 'user_created',
      subject: 'Welcome {{user_name}}',
      text: 'Your role: {{role}}',
    });
    const sent = await apiSend(h.url, apiKey, { template: 'User_Created', to: 'jane@example.org' });
    expect(sent.status).toBe(202);
    const requestId = String(sent.body.request_id);
    await page.goto(`/messages/${encodeURIComponent(requestId)}`);
    await reloadUntil(
      page,
      async () => (await page.getByTestId('message-status').innerText()) === 'failed',
      'the message to fail',
    );
    expect(await page.getByTestId('message-error').innerText()).toBe('Template not found');
    const missing = page.getByTestId('template-missing');
    expect(await missing.innerText()).toMatch(/has no template named User_Created/);
    expect(await page.getByTestId('template-suggestion').innerText()).toBe('user_created');
    // The existing name links to its editor; the missing one is not a link to a 404.
    expect(await missing.getByRole('link', { name: 'user_created', exact: true }).getAttribute('href')).toBe(
      `/projects/${projectId}/templates/edit/user_created`,
    );
    await page.getByTestId('create-template').click();
    await page.waitForURL(/\/templates\/new\?name=User_Created$/);
    expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('User_Created');
  });

  it('lists the placeholders that rendered blank', async () => {
    const sent = await apiSend(h.url, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      data: { user_name: 'Jane', role: null },
    });
    await page.goto(`/messages/${encodeURIComponent(String(sent.body.request_id))}`);
    expect(await page.getByTestId('blank-placeholders').innerText()).toMatch(
      /Rendered blank: \{\{role\}\}\./,
    );
  });

  it('flags placeholders without a sample value in the template preview', async () => {
    await page.goto(`/projects/${projectId}/templates/edit/user_created`);
    await page.getByLabel('Sample data (JSON)').fill('{"user_name": "Jane"}');
    await page.getByTestId('placeholder-blank').first().waitFor();
    expect(await page.getByTestId('placeholder-blank').allInnerTexts()).toEqual(['{{role}}']);
    await page.getByLabel('Sample data (JSON)').fill('{"user_name": "Jane", "role": "admin"}');
    await page.getByTestId('placeholder-blank').first().waitFor({ state: 'detached' });
  });
});

describe('template editor', () => {
  it('keeps the sample data typed before "Create", and after saving again', async () => {
    await page.goto(`/projects/${projectId}/templates/new`);
    await page.getByLabel('Name', { exact: true }).fill('order_shipped');
    await page.getByLabel('Subject').fill('Order {{order_id}} shipped');
    await page.getByLabel('Text body').fill('Hello {{user_name}}, order {{order_id}} is on its way.');
    const typed = '{"user_name": "Ada", "order_id": "A-1042"}';
    await page.getByLabel('Sample data (JSON)').fill(typed);
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.getByText('Template created.').waitFor();
    expect(await page.getByLabel('Sample data (JSON)').inputValue()).toBe(typed);
    await page.getByTestId('preview-subject').filter({ hasText: 'Order A-1042 shipped' }).waitFor();

    const changed = '{"user_name": "Grace", "order_id": "B-7"}';
    await page.getByLabel('Sample data (JSON)').fill(changed);
    await page.getByRole('button', { name: 'Save template' }).click();
    await page.getByText('Template saved.').waitFor();
    await page.reload();
    expect(await page.getByLabel('Sample data (JSON)').inputValue()).toBe(changed);
  });
});

describe('a new project and its key', () => {
  it('shows the key once, names a template to create first, and a refresh does not post the form again', async () => {
    await page.goto('/projects/new');
    await page.getByLabel('Name', { exact: true }).fill('refreshed');
    await page.getByRole('button', { name: /create project/i }).click();
    await page.getByTestId('curl-example').waitFor();
    expect(await page.locator('#api-key').inputValue()).toMatch(/^hrl_/);
    // A new project has no template: the page says to create the one its example names.
    expect(await page.getByTestId('needs-template').innerText()).toContain('create one named welcome');
    expect(await page.getByTestId('curl-example').innerText()).toContain('"template": "welcome"');
    const created = await h.server.services.projects.resolve('refreshed');
    expect(new URL(page.url()).pathname).toBe(`/projects/${created.id}`);

    await page.reload();
    expect(await page.locator('body').innerText()).not.toContain('already exists');
    expect(await page.locator('#api-key').count()).toBe(0);
    expect(new URL(page.url()).pathname).toBe(`/projects/${created.id}`);
    expect(await h.server.services.projects.list()).toHaveLength(2);
  });
});

describe('Admins page', () => {
  it('removes another admin, whose session ends at once, and offers no way to remove yourself', async () => {
    await h.server.services.admins.create('leaving@herald.example', 'password of the leaver');
    const leaver = await h.newPage();
    await leaver.page.goto('/login');
    await leaver.page.getByLabel('Email').fill('leaving@herald.example');
    await leaver.page.getByLabel('Password').fill('password of the leaver');
    await leaver.page.getByRole('button', { name: /log in/i }).click();
    await leaver.page.waitForURL((url) => url.pathname !== '/login');

    await page.goto('/admins');
    const own = page.locator('tr', { has: page.locator('.badge', { hasText: 'you' }) });
    expect(await own.getByRole('button', { name: /remove/i }).count()).toBe(0);
    await page.getByRole('button', { name: 'Remove leaving@herald.example' }).click();
    await page.waitForURL((url) => url.search.includes('notice=removed'));
    expect(await page.getByRole('status').innerText()).toContain('Admin removed');
    expect(await page.locator('table').innerText()).not.toContain('leaving@herald.example');

    await leaver.page.goto('/');
    expect(new URL(leaver.page.url()).pathname).toBe('/login');
  });
});

describe('names and values as long as the checks allow', () => {
  it('wrap inside their boxes: no page is wider than the window', async () => {
    const name = `long${'A'.repeat(96)}`;
    const { project, apiKey: key } = await h.server.services.projects.create({
      name,
      contactEmail: `${'c'.repeat(60)}@${'d'.repeat(60)}.example`,
      fromEmail: `${'f'.repeat(60)}@${'g'.repeat(60)}.example`,
      quotaLimit: null,
    });
    const template = `t${'x'.repeat(199)}`;
    await h.server.services.templates.create(project.id, { name: template, subject: 'S', text: 'T' });
    const sent = await apiSend(h.url, key, {
      template,
      to: 'jane@example.org',
      metadata: { order: 'o'.repeat(200) },
    });
    expect(sent.status).toBe(202);
    for (const path of [
      '/projects',
      `/projects/${project.id}`,
      `/projects/${project.id}/templates`,
      `/messages/${encodeURIComponent(String(sent.body.request_id))}`,
    ]) {
      await page.goto(path);
      const widths = await page.evaluate<{ page: number; window: number }>(
        '({ page: document.documentElement.scrollWidth, window: window.innerWidth })',
      );
      expect(widths.page, path).toBeLessThanOrEqual(widths.window);
    }
  });
});
