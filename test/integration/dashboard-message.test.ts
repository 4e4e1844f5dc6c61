import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASK } from '../../src/domain/sensitive.js';
import { backend } from '../helpers/database.js';
import { sendOk } from '../helpers/http.js';
import { dashboardApp } from '../helpers/dashboard.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * A message's page in the dashboard: secret placeholder values are masked unless revealed, and
 * stored data of any shape (even nested deeper than the API now accepts) never breaks the page.
 */

let ctx: TestContext;
let app: FastifyInstance;
let session: string;
let apiKey: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ app, session } = await dashboardApp(ctx));
  ({ apiKey, projectId } = await seedProject(ctx.services, {
    template: { name: 'welcome', subject: 'Hi {{user_name}}', text: 'Your password is {{password}}.' },
  }));
});
afterAll(async () => {
  await app?.close();
  await ctx?.close();
});

const open = (requestId: string, query = '') =>
  app.inject({ url: `/messages/${requestId}${query}`, cookies: { herald_session: session } });

describe(`message page (${backend})`, () => {
  it('masks a password placeholder in the request data and the rendered text, and reveals it on request', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'jane@example.org',
      data: { user_name: 'Jane', password: 'hunter2-secret' },
    });
    // Render as the worker would, so the rendered text holds the value too.
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ subject: 'Hi Jane', text_body: 'Your password is hunter2-secret.' })
      .where('request_id', '=', request_id)
      .execute();
    const masked = await open(request_id);
    expect(masked.statusCode).toBe(200);
    expect(masked.body).not.toContain('hunter2-secret');
    expect(masked.body).toContain(MASK);
    expect(masked.body).toContain('data-testid="reveal"');
    const revealed = await open(request_id, '?reveal=1');
    expect(revealed.statusCode).toBe(200);
    expect(revealed.body).toContain('hunter2-secret');
  });

  it("keeps the template's own words when the secret is one of them", async () => {
    const { request_id } = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'jane@example.org',
      data: { user_name: 'Jane', password: 'password' },
    });
    // As the worker renders it.
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ subject: 'Hi Jane', text_body: 'Your password is password.' })
      .where('request_id', '=', request_id)
      .execute();
    const masked = await open(request_id);
    expect(masked.statusCode).toBe(200);
    expect(masked.body).toContain(`Your password is ${MASK}.`);
    // The footer says which Herald this is.
    expect(masked.body).toMatch(/data-testid="version">Herald \d+\.\d+\.\d+/);
  });

  it('shows a canceled scheduled send as canceled, not as a failed delivery', async () => {
    const sendAt = new Date(Date.now() + 3_600_000).toISOString();
    const { request_id } = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'jane@example.org',
      send_at: sendAt,
    });
    const canceled = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${request_id}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(canceled.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
    const shown = await open(request_id);
    expect(shown.body).toContain('<span class="badge neutral" data-testid="message-status">canceled</span>');
    const list = await app.inject({ url: '/messages', cookies: { herald_session: session } });
    expect(list.body).toContain('<span class="badge neutral">canceled</span>');
  });

  it('answers 200 for a message whose stored data is nested 4,000 levels deep', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey, { template: 'welcome', to: 'jane@example.org' });
    const deep = `${'{"a":'.repeat(4000)}1${'}'.repeat(4000)}`;
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ data: deep })
      .where('request_id', '=', request_id)
      .where('project_id', '=', projectId)
      .execute();
    const page = await open(request_id);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('nested too deeply to display');
    expect((await open(request_id, '?reveal=1')).statusCode).toBe(200);
  });

  it('says when the content was erased by the retention rule', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'jane@example.org',
      data: { password: 'gone-for-good' },
    });
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ state: 'sent', data: '{}', content_erased_at: Date.now() })
      .where('request_id', '=', request_id)
      .execute();
    const page = await open(request_id, '?reveal=1');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('data-testid="content-erased"');
    expect(page.body).not.toContain('gone-for-good');
  });
});
