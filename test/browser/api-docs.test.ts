import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type DashboardHarness } from './harness.js';

/** product.md §6: /docs/api renders the OpenAPI document in Chromium from installed files only. */

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
    expect(await page.locator('.opblock').count()).toBe(4);
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
