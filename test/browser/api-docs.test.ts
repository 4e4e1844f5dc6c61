import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type DashboardHarness } from './harness.js';

/**
 * product.md §6 and §13: /docs/api renders the OpenAPI document, the management API included, in
 * Chromium from installed files only.
 */

let h: DashboardHarness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

describe('the API reference page', () => {
  it('renders every operation, loading nothing from another origin and breaking no policy', async () => {
    const { page } = await h.newPage();
    const origin = new URL(h.url).origin;
    const foreign: string[] = [];
    const problems: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(origin) && !request.url().startsWith('data:'))
        foreign.push(request.url());
    });
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));

    await page.goto('/docs/api');
    for (const operation of [
      'sendNotification',
      'sendNotificationBatch',
      'getNotification',
      'cancelNotification',
    ])
      await page.locator(`#operations-notifications-${operation}`).waitFor();
    // The management API's operations too, each under its resource's tag (product.md §13).
    for (const operation of ['adminCreateProject', 'adminPutTemplate', 'adminSearchNotifications'])
      await page.locator(`[id$="-${operation}"]`).waitFor();
    const document = (await (await fetch(`${h.url}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const operations = Object.values(document.paths).flatMap((item) => Object.keys(item));
    expect(operations.length).toBeGreaterThan(4);
    expect(await page.locator('.opblock').count()).toBe(operations.length);
    expect(await page.locator('.info .title').innerText()).toContain('Herald API');
    expect(foreign).toEqual([]);
    expect(problems).toEqual([]);
  });

  it('leads back to the dashboard from its logo, and has the tab icon', async () => {
    const { page } = await h.newPage();
    await page.goto('/docs/api');
    const logo = page.locator('.topbar a').first();
    await logo.waitFor();
    expect(await logo.getAttribute('href')).toBe('/');
    const icon = await page.locator('link[rel="icon"]').first().getAttribute('href');
    expect(icon).toBeTruthy();
    await Promise.all([page.waitForURL((url) => url.pathname !== '/docs/api'), logo.click()]);
    expect(new URL(page.url()).pathname).not.toMatch(/^\/docs\/api/);
    const favicon = await fetch(`${h.url}/favicon.ico`);
    expect(favicon.status).toBe(200);
    expect(favicon.headers.get('content-type')).toContain('image/svg+xml');
  });
});
