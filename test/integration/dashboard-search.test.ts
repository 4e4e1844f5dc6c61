import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bulkNotifications } from '../helpers/bulk-notifications.js';
import { backend } from '../helpers/database.js';
import { dashboardApp } from '../helpers/dashboard.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * The delivery log's search with a long history: a filter that matches one old message looks
 * through a bounded window of ids per page (so a page's cost does not grow with the history) and
 * offers to go on; following it finds the message. The overview's counts come from the usage
 * counters and agree with the rows.
 */

const STORED = 250_000;
let ctx: TestContext;
let app: FastifyInstance;
let session: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ app, session } = await dashboardApp(ctx));
  ({ projectId } = await seedProject(ctx.services));
  await bulkNotifications(ctx.services.storage.db, backend, projectId, STORED);
}, 120_000);
afterAll(async () => {
  await app?.close();
  await ctx?.close();
});

const get = (url: string) => app.inject({ url, cookies: { herald_session: session } });

describe(`delivery log search over ${STORED} messages (${backend})`, () => {
  it('looks through a window of ids per page and finds an old message on the next one', async () => {
    const first = await get('/messages?recipient=user10%40example.org');
    expect(first.statusCode).toBe(200);
    expect(first.body).toContain('data-testid="search-window"');
    expect(first.body).not.toContain('user10@example.org<');
    const older = /href="(\/messages\?[^"]*before=\d+[^"]*)"/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
    expect(older).toBeDefined();
    const second = await get(older!);
    expect(second.statusCode).toBe(200);
    expect(second.body).toContain('user10@example.org');
  });

  it('pages the unfiltered log by id, 50 at a time', async () => {
    const first = await get('/messages');
    const next = /href="(\/messages\?before=(\d+))"/.exec(first.body);
    expect(next).not.toBeNull();
    expect(first.body).toContain(`user${STORED}@example.org`);
    const second = await get(next![1]!);
    expect(second.body).not.toContain(`user${STORED}@example.org<`);
    expect(second.body).toContain(`user${Number(next![2]) - 1}@example.org`);
  });

  it('finds a recent match on the first page', async () => {
    const page = await get(`/messages?recipient=user${STORED - 5}%40example.org`);
    expect(page.body).toContain(`user${STORED - 5}@example.org`);
  });

  it('shows the project overview counts from the usage counters', async () => {
    const overview = await get(`/projects/${projectId}`);
    expect(overview.statusCode).toBe(200);
    expect(await ctx.services.usage.totals(projectId)).toEqual({
      queued: 0,
      sent: STORED - STORED / 1000,
      failed: STORED / 1000,
    });
    expect(overview.body).toContain((STORED - STORED / 1000).toLocaleString('en-US'));
  });
});
