import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createFirstAdmin,
  reloadUntil,
  screenshot,
  startHarness,
  unlabelledControls,
  type DashboardHarness,
} from './harness.js';

/**
 * product.md §13 in the dashboard, in Chromium: an admin token is created and shown once, works on
 * the management API, shows in the audit log with each call it made, and is revoked with a
 * confirmation, after which the API refuses it.
 */

let h: DashboardHarness;
let page: Page;

beforeAll(async () => {
  h = await startHarness();
  ({ page } = await h.newPage());
  await createFirstAdmin(page, h.setupUrl);
});
afterAll(() => h?.close());

async function adminCall(token: string, method: string, path: string, body?: unknown): Promise<number> {
  const response = await fetch(`${h.url}/api/v1/admin${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return response.status;
}

describe('admin tokens in the dashboard', () => {
  let token = '';

  it('creates a token and shows it once, with a copy button', async () => {
    await page.goto('/projects');
    await page.getByRole('link', { name: 'Admin tokens' }).click();
    await page.waitForURL(/\/tokens$/);
    expect(await unlabelledControls(page)).toEqual([]);
    await page.getByLabel('Name').fill('ci deploy');
    await page.getByRole('button', { name: 'Create token' }).click();
    const created = page.getByTestId('token-created');
    await created.waitFor();
    token = await page.getByLabel('Admin token').inputValue();
    expect(token).toMatch(/^hrla_[0-9A-Za-z]{38}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(token);
    await screenshot(page, 'admin-token-created');

    await page.getByRole('link', { name: 'I have stored the token, continue' }).click();
    await page.waitForURL(/\/tokens$/);
    const row = page.getByTestId('token').filter({ hasText: 'ci deploy' });
    expect(await row.innerText()).toContain(`${token.slice(0, 13)}…`);
    expect(await page.content()).not.toContain(token.slice(13));
  });

  it('refuses a name that is taken, in the words of the CLI', async () => {
    await page.getByLabel('Name').fill('ci deploy');
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.getByText('An admin token named "ci deploy" already exists').waitFor();
    expect(await page.getByLabel('Name').inputValue()).toBe('ci deploy');
  });

  it('shows the calls made with it in the audit log', async () => {
    expect(await adminCall(token, 'POST', '/projects', { name: 'from-ci' })).toBe(201);
    expect(
      await adminCall(token, 'PUT', '/projects/from-ci/templates/welcome', { subject: 'Hi', text: 'Hello' }),
    ).toBe(201);
    expect(await adminCall(token, 'GET', '/projects/nowhere')).toBe(404);
    await page.goto('/audit-log');
    await reloadUntil(
      page,
      async () => (await page.getByTestId('audit-entry').count()) === 3,
      'three audit entries',
    );
    const entries = await page.getByTestId('audit-entry').allInnerTexts();
    expect(entries[0]).toMatch(
      /ci deploy\s+GET \/api\/v1\/admin\/projects\/nowhere\s+404\s+Project not found: nowhere/,
    );
    expect(entries[1]).toMatch(
      /ci deploy\s+PUT \/api\/v1\/admin\/projects\/from-ci\/templates\/welcome\s+201\s+from-ci/,
    );
    expect(entries[2]).toMatch(/ci deploy\s+POST \/api\/v1\/admin\/projects\s+201\s+from-ci/);
    await screenshot(page, 'audit-log');
    // The filter by token keeps them all; the dashboard's own work is not an audit entry.
    await page.getByLabel('Token').selectOption({ label: 'ci deploy' });
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/token=\d+/);
    expect(await page.getByTestId('audit-entry').count()).toBe(3);
  });

  it('revokes it only once confirmed, and the API refuses it at once', async () => {
    await page.goto('/tokens');
    const row = page.getByTestId('token').filter({ hasText: 'ci deploy' });
    await row.getByText('Revoke…').click();
    const revoke = row.getByRole('button', { name: 'Revoke token' });
    await revoke.click();
    // The browser holds the form back until the box is ticked.
    expect(page.url()).toMatch(/\/tokens$/);
    expect(await adminCall(token, 'GET', '/projects')).toBe(200);
    await row.getByLabel('I understand it stops working now').check();
    await revoke.click();
    await page.getByText('Token revoked. Calls made with it are refused from now on.').waitFor();
    expect(await page.getByTestId('token').filter({ hasText: 'ci deploy' }).innerText()).toContain('revoked');
    expect(await adminCall(token, 'GET', '/projects')).toBe(401);
  });
});
