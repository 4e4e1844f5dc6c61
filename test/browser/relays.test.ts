import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/dead-relays.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { apiSend, createFirstAdmin, reloadUntil, startHarness, type DashboardHarness } from './harness.js';

/**
 * product.md §10 in the dashboard, in Chromium: the SMTP page says at once that a relay is down,
 * since when and why, and that its mail goes through the fallback; the fallback is set in the form
 * as a URL whose password is never shown again.
 */

let h: DashboardHarness;
let fallback: SmtpSink;
let page: Page;
let projectId: number;
let apiKey: string;
let deadPort: number;

beforeAll(async () => {
  [h, fallback, deadPort] = await Promise.all([
    startHarness({ HERALD_SMTP_TIMEOUT_MS: '2000' }),
    new SmtpSink().start(),
    freePort(),
  ]);
  ({ page } = await h.newPage());
  await createFirstAdmin(page, h.setupUrl);
  const { project, apiKey: key } = await h.server.services.projects.create({
    name: 'relays',
    contactEmail: null,
    fromEmail: 'noreply@herald.example',
    quotaLimit: null,
  });
  projectId = project.id;
  apiKey = key;
  await h.server.services.templates.create(projectId, { name: 'hello', subject: 'Hi', text: 'Hello' });
});
afterAll(async () => {
  await h?.close();
  await fallback?.stop();
});

describe('SMTP page of a project whose relay is down', () => {
  it('sets a fallback relay in the form, keeping its password out of the page', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    await page.getByLabel('Host').fill('127.0.0.1');
    await page.getByLabel('Port').fill(String(deadPort));
    await page.getByLabel('Security').selectOption('none');
    await page
      .getByLabel('Fallback relay')
      .fill(`smtp://backup:f4llback-pass@127.0.0.1:${fallback.port}?security=none`);
    await page.getByRole('button', { name: 'Save SMTP settings' }).click();
    await page.getByText('SMTP settings saved.').waitFor();
    expect(await page.getByLabel('Fallback relay').inputValue()).toBe(
      `smtp://backup@127.0.0.1:${fallback.port}?security=none`,
    );
    expect(await page.content()).not.toContain('f4llback-pass');
    expect(await page.locator('#fallback-hint').innerText()).toMatch(/Its password is stored/);
    // Saved again as shown, the stored password stays.
    await page.getByRole('button', { name: 'Save SMTP settings' }).click();
    await page.getByText('SMTP settings saved.').waitFor();
    const smtp = await h.server.services.smtpSettings.forDelivery(projectId);
    expect(smtp?.fallback).toMatchObject({ username: 'backup', password: 'f4llback-pass' });
    expect(await page.getByTestId('relay-primary').innerText()).toMatch(/^up\s+Primary/);
    expect(await page.getByTestId('relay-fallback').innerText()).toMatch(/^up\s+Fallback/);
  });

  it('says the relay is down, since when and why, and that its mail goes through the fallback', async () => {
    // The sink takes mail without a login.
    await h.server.services.smtpSettings.setFromUrl(projectId, `smtp://127.0.0.1:${deadPort}?security=none`, {
      fallbackUrl: fallback.url,
    });
    const sent = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) => apiSend(h.url, apiKey, { template: 'hello', to: `u${n}@example.org` })),
    );
    for (const { status } of sent) expect(status).toBe(202);
    await fallback.waitFor(6, 20_000);
    await page.goto(`/projects/${projectId}/smtp`);
    const banner = page.getByTestId('relay-down');
    await reloadUntil(page, async () => (await banner.count()) > 0, 'the relay-down banner');
    const text = await banner.innerText();
    expect(text).toContain(`127.0.0.1:${deadPort} has been down since`);
    expect(text).toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(just now\)/);
    expect(await page.getByTestId('relay-down-error').innerText()).toMatch(/ECONNREFUSED/);
    expect(text).toMatch(/one connection at a time, next at .* UTC/);
    expect(text).toContain('sends its mail through the fallback relay meanwhile');
    expect(await page.getByTestId('relay-primary').innerText()).toMatch(/^down\s+Primary/);
    expect(await page.getByTestId('relay-fallback').innerText()).toMatch(/^up\s+Fallback/);
    // Every message went out through the fallback.
    await waitUntil(async () => {
      const rows = await h.server.services.notifications.list({ projectId, limit: 10 });
      return rows.every((row) => row.state === 'sent' && row.relay === 'fallback') ? true : undefined;
    });
  });

  it('refuses a fallback URL that does not parse, showing it without the password typed', async () => {
    await page.goto(`/projects/${projectId}/smtp`);
    await page.getByLabel('Fallback relay').fill('http://typo:s3cret-typo@backup.example');
    await page.getByRole('button', { name: 'Save SMTP settings' }).click();
    await page.getByText('SMTP URL must start with smtp:// or smtps://').waitFor();
    expect(await page.content()).not.toContain('s3cret-typo');
    expect(await page.getByLabel('Fallback relay').inputValue()).toBe('http://typo@backup.example');
  });

  it('verifies the fallback relay with the primary', async () => {
    const refused = await freePort();
    await h.server.services.smtpSettings.setFromUrl(projectId, fallback.url, {
      fallbackUrl: `smtp://127.0.0.1:${refused}?security=none`,
    });
    await page.goto(`/projects/${projectId}/smtp`);
    const result = page.getByTestId('smtp-result');
    await page.getByRole('button', { name: 'Verify connection' }).click();
    await result.filter({ hasText: 'Fallback connection failed' }).waitFor();
    expect(await result.innerText()).toMatch(
      new RegExp(
        `Connected to smtp://127\\.0\\.0\\.1:${fallback.port}[^\\n]*\\nFallback smtp://127\\.0\\.0\\.1:${refused} \\(security=none\\): .*ECONNREFUSED`,
      ),
    );
    await h.server.services.smtpSettings.setFromUrl(projectId, fallback.url, {
      fallbackUrl: fallback.url.replace('127.0.0.1', 'localhost'),
    });
    await page.goto(`/projects/${projectId}/smtp`);
    await page.getByRole('button', { name: 'Verify connection' }).click();
    await result.filter({ hasText: 'Connection verified' }).waitFor();
    expect(await result.innerText()).toContain(
      `Fallback: Connected to smtp://localhost:${fallback.port} (security=none)`,
    );
  });
});
