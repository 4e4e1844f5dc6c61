import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createFirstAdmin,
  screenshot,
  startHarness,
  unlabelledControls,
  type DashboardHarness,
} from './harness.js';

/**
 * Templates people write, in the dashboard (product.md §11): a layout, a template with logic in
 * it previewed live, a parse error shown inline next to the preview, a French variant, the
 * history with the difference between two versions, and restoring one.
 */

let h: DashboardHarness;
let page: Page;
let projectId: number;

beforeAll(async () => {
  h = await startHarness();
  ({ page } = await h.newPage());
  await createFirstAdmin(page, h.setupUrl);
  const { project } = await h.server.services.projects.create({
    name: 'shop',
    contactEmail: null,
    fromEmail: 'shop@herald.example',
    quotaLimit: null,
  });
  projectId = project.id;
});
afterAll(() => h?.close());

describe('templates with logic, layouts, locales and versions in the dashboard', () => {
  it('creates a layout, previews logic inside it, and shows a parse error inline', async () => {
    await page.goto(`${h.url}/projects/${projectId}/templates`);
    await page.getByRole('link', { name: 'Layouts' }).click();
    await page.getByLabel('Name').fill('brand');
    await page
      .getByLabel('HTML frame')
      .fill('<main style="font-family:sans-serif">{{{content}}}</main><footer>{{company}}</footer>');
    await page.getByLabel('Text frame').fill('{{content}}\n-- {{company}}');
    await page.getByRole('button', { name: 'Create layout' }).click();
    await page.getByText('Layout created.').waitFor();
    await screenshot(page, 'layouts');

    await page.goto(`${h.url}/projects/${projectId}/templates/new`);
    await page.getByLabel('Name', { exact: true }).fill('order_shipped');
    await page.getByLabel('Layout').selectOption('brand');
    await page.getByLabel('Subject').fill('Order {{order.id}} shipped');
    await page
      .getByLabel('Text body')
      .fill(
        '{{#each order.lines}}\n- {{name}} × {{qty}}\n{{/each}}\n{{#if trial}}Your trial ends {{trial_end}}.{{/if}}',
      );
    await page
      .getByLabel('HTML body')
      .fill(
        '<ul>{{#each order.lines}}<li>{{name}} × {{qty}}</li>{{/each}}</ul>{{#if trial}}<p>Trial</p>{{/if}}',
      );
    await page
      .getByLabel('Sample data (JSON)')
      .fill(
        '{"company": "Shop & Co", "trial": true, "trial_end": "Friday", "order": {"id": "A-17", "lines": [{"name": "Tea", "qty": 2}, {"name": "Cup", "qty": 1}]}}',
      );
    await page
      .getByTestId('preview-text')
      .filter({ hasText: '- Tea × 2\n- Cup × 1\nYour trial ends Friday.\n-- Shop & Co' })
      .waitFor();
    const frame = page.frameLocator('iframe[data-testid="preview-html"]');
    await frame.locator('main li', { hasText: 'Cup × 1' }).waitFor();
    await frame.locator('footer', { hasText: 'Shop & Co' }).waitFor();
    await screenshot(page, 'template-editor-logic', true);

    // A block left open: the preview says where, and the form refuses to save it.
    await page.getByLabel('Subject').fill('Order {{#if order.id}}{{order.id}}');
    await page.getByRole('alert').filter({ hasText: 'Invalid template: subject, line 1, column' }).waitFor();
    await screenshot(page, 'template-editor-error');
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.getByRole('alert').filter({ hasText: '{{#if}} is not closed' }).first().waitFor();
    expect(await page.getByLabel('Subject').inputValue()).toBe('Order {{#if order.id}}{{order.id}}');

    await page.getByLabel('Subject').fill('Order {{order.id}} shipped');
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.getByText('Template created.').waitFor();
    expect(await unlabelledControls(page)).toEqual([]);
  });

  it('adds a French variant, then compares two versions and restores one', async () => {
    await page.goto(`${h.url}/projects/${projectId}/templates/edit/order_shipped`);
    await page.getByTestId('add-locale').click();
    await page.getByLabel('Locale').fill('fr');
    await page.getByLabel('Subject').fill('Commande {{order.id}} expédiée');
    await page.getByLabel('Text body').fill('{{#each order.lines}}\n- {{name}} × {{qty}}\n{{/each}}');
    await page.getByLabel('HTML body').fill('<ul>{{#each order.lines}}<li>{{name}}</li>{{/each}}</ul>');
    await page.getByTestId('preview-subject').filter({ hasText: 'Commande A-17 expédiée' }).waitFor();
    await page.getByRole('button', { name: 'Save variant' }).click();
    await page.getByText('Template saved.').waitFor();
    await page.getByTestId('variant-tabs').getByRole('link', { name: 'fr', exact: true }).waitFor();
    expect(await page.getByLabel('Subject').inputValue()).toBe('Commande {{order.id}} expédiée');

    await page.getByTestId('history-link').click();
    expect(await page.getByTestId('current-version').innerText()).toBe('2');
    const diff = page.getByTestId('diff');
    await diff.getByText('+ Commande {{order.id}} expédiée').waitFor();
    await screenshot(page, 'template-history', true);

    await page.getByTestId('restore-1').click();
    await page.getByText('Version 1 restored as version 3.').waitFor();
    expect(await page.getByTestId('current-version').innerText()).toBe('3');
    const template = await h.server.services.templates.get(projectId, 'order_shipped');
    expect(template).toMatchObject({ version: 3, layout: 'brand', locales: {} });
  });
});
