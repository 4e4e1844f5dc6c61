import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/roles.js';
import {
  INTERRUPTED_RESPONSE,
  insertAttempt,
  insertInterruptedAttempts,
} from '../../src/storage/delivery-attempts.js';
import { MASK } from '../../src/domain/sensitive.js';
import { RENDER_LIMITS } from '../../src/domain/template/budget.js';
import { backend } from '../helpers/database.js';
import { sendOk, settledStatus } from '../helpers/http.js';
import { csrfOf, dashboardApp, dashboardClient } from '../helpers/dashboard.js';
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

/** A send of `welcome`, with its request id and its row's id (to record attempts of it). */
async function sendWelcome(): Promise<{ request_id: string; id: number }> {
  const { request_id } = await sendOk(ctx.app, apiKey, { template: 'welcome', to: 'jane@example.org' });
  const { id } = await ctx.services.storage.db
    .selectFrom('notifications')
    .select('id')
    .where('request_id', '=', request_id)
    .executeTakeFirstOrThrow();
  return { request_id, id };
}

/** A send of `welcome` to `to`, due in a day: a message a cancel can still stop. */
const sendScheduled = async (to: string) =>
  (
    await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to,
      data: { user_name: 'Jane', password: 'x' },
      send_at: new Date(Date.now() + 86_400_000).toISOString(),
    })
  ).request_id;

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
    const request_id = await sendScheduled('jane@example.org');
    const canceled = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${request_id}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(canceled.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
    const shown = await open(request_id);
    expect(shown.body).toContain('<span class="badge neutral" data-testid="message-status">canceled</span>');
    // The page tells one story: canceled, never rendered, nothing to warn about its data.
    expect(shown.body).toContain('data-testid="canceled"');
    // Its sender or an operator: the page does not know which, and does not say it was the sender.
    expect(shown.body).toContain('Before it was sent, by its sender or an operator: it will not be sent.');
    expect(shown.body).toContain('Not rendered: it was canceled before a worker rendered it.');
    expect(shown.body).not.toContain('failed before that');
    expect(shown.body).not.toContain('data-testid="blank-placeholders"');
    const list = await app.inject({ url: '/messages', cookies: { herald_session: session } });
    expect(list.body).toContain('<span class="badge neutral">canceled</span>');
  });

  it('shows an attempt to be retried as failed, with the time it ended, not as the time of the retry', async () => {
    const { request_id, id } = await sendWelcome();
    await insertAttempt(ctx.services.storage.db, {
      notification_id: id,
      attempt: 1,
      started_at: Date.UTC(2026, 10, 30, 10, 7, 37),
      finished_at: Date.UTC(2026, 10, 30, 10, 7, 37, 314),
      outcome: 'retry',
      smtp_code: 451,
      response: '451 4.3.0 Try again later',
      transport: 'smtp',
      relay: 'primary',
    });
    const shown = await open(request_id);
    expect(shown.body).toContain('<strong>Attempt 1: failed (to be retried)</strong>');
  });

  it('shows an attempt its worker never finished as interrupted, saying the relay may have it', async () => {
    const { request_id, id } = await sendWelcome();
    await insertInterruptedAttempts(
      ctx.services.storage.db,
      [{ id, attempts: 1, claimedAt: Date.now() }],
      Date.now(),
    );
    const shown = await open(request_id);
    expect(shown.body).toContain('<li class="interrupted">');
    expect(shown.body).toContain('<strong>Attempt 1: interrupted (may have reached the relay)</strong>');
    expect(shown.body).toContain(INTERRUPTED_RESPONSE);
  });

  it('marks a captured message as captured, and a failed one in capture mode as failed only', async () => {
    const worker = createWorker(ctx.services);
    worker.start();
    try {
      const { project, apiKey: noSenderKey } = await ctx.services.projects.create({
        name: 'capture-no-sender',
      });
      await ctx.services.templates.create(project.id, { name: 'welcome', subject: 'Hi', text: 'Hello' });
      const failed = await sendOk(ctx.app, noSenderKey, { template: 'welcome', to: 'jane@example.org' });
      const kept = await sendOk(ctx.app, apiKey, { template: 'welcome', to: 'jane@example.org' });
      expect((await settledStatus(ctx.app, noSenderKey, failed.request_id)).status).toBe('failed');
      expect((await settledStatus(ctx.app, apiKey, kept.request_id)).status).toBe('sent');
      expect((await open(failed.request_id)).body).not.toContain('captured, not sent');
      expect((await open(kept.request_id)).body).toContain('captured, not sent');
      const list = await app.inject({
        url: `/messages?project=${project.id}`,
        cookies: { herald_session: session },
      });
      expect(list.body).toContain('No from address configured');
      expect(list.body).not.toContain('<span class="badge neutral">captured</span>');
    } finally {
      await worker.stop();
    }
  });

  it('says a message whose template could not be rendered failed in its render, not before it', async () => {
    const worker = createWorker(ctx.services);
    worker.start();
    try {
      const { request_id } = await sendOk(ctx.app, apiKey, {
        template: 'welcome',
        to: 'jane@example.org',
        data: { user_name: 'x'.repeat(RENDER_LIMITS.subject), password: 'x' },
      });
      expect((await settledStatus(ctx.app, apiKey, request_id)).status).toBe('failed');
      const page = (await open(request_id)).body;
      expect(page).toContain('Template render failed: the subject is 2003 characters');
      expect(page).toContain(
        'Not rendered: its template could not be rendered with this data (the error above says why).',
      );
      expect(page).not.toContain('failed before that');
    } finally {
      await worker.stop();
    }
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

describe(`a send's files, Reply-To and metadata in the dashboard (${backend})`, () => {
  it('lists the files by name, type and size, with the Reply-To and the metadata', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'jane@example.org',
      reply_to: 'help@shop.example',
      metadata: { order_id: 'o-77', region: 'eu <west>' },
      attachments: [
        { filename: 'Invoice <A-1>.pdf', content: Buffer.alloc(2048, 1).toString('base64') },
        { filename: 'Reçu.txt', content: Buffer.from('ok').toString('base64') },
      ],
    });
    const page = await open(request_id);
    expect(page.statusCode).toBe(200);
    const files = /<table class="table" data-testid="attachments">([\s\S]*?)<\/table>/.exec(page.body)?.[1];
    expect(files).toContain('Invoice _A-1_.pdf');
    expect(files).toContain('application/pdf');
    expect(files).toContain('2.0 KiB');
    expect(files).toContain('Reçu.txt');
    expect(files).toContain('2 B');
    expect(page.body).toMatch(/data-testid="reply-to">help@shop\.example</);
    expect(page.body).toContain('order_id=o-77');
    // Values are escaped, and each links to the project's messages with that value.
    expect(page.body).toContain('region=eu &lt;west&gt;');
    expect(page.body).toContain(`href="/messages?project=${projectId}&amp;metadata.order_id=o-77"`);
  });
});

describe(`the delivery log's metadata filter (${backend})`, () => {
  const log = (query: string) =>
    app.inject({ url: `/messages${query}`, cookies: { herald_session: session } });
  const recipients = (body: string) =>
    [...body.matchAll(/<td class="wrap">([^<]*@[^<]*)<\/td>/g)].map((m) => m[1]);

  it('finds the messages with a value, typed as KEY=VALUE or linked as metadata.KEY=VALUE, in every project', async () => {
    const other = await seedProject(ctx.services, {
      template: { name: 'welcome', subject: 'Hi', text: 'Hello' },
    });
    const send = (key: string, to: string, metadata: Record<string, string> | undefined, headers = {}) =>
      sendOk(ctx.app, key, { template: 'welcome', to, ...(metadata && { metadata }) }, headers);
    await send(apiKey, 'm1@example.org', { order_id: 'o-100', region: 'eu' });
    await send(apiKey, 'm2@example.org', { order_id: 'o-101', region: 'eu' });
    // Through the transaction path (an Idempotency-Key) as well as the one-statement one.
    await send(
      apiKey,
      'm3@example.org',
      { order_id: 'o-100', region: 'us' },
      { 'idempotency-key': 'meta-3' },
    );
    await send(apiKey, 'm4@example.org', undefined);
    await send(other.apiKey, 'm5@example.org', { order_id: 'o-100' });

    expect(recipients((await log('?metadata=order_id%3Do-100')).body)).toEqual([
      'm5@example.org',
      'm3@example.org',
      'm1@example.org',
    ]);
    expect(recipients((await log('?metadata.order_id=o-100')).body)).toEqual([
      'm5@example.org',
      'm3@example.org',
      'm1@example.org',
    ]);
    expect(recipients((await log(`?project=${projectId}&metadata.order_id=o-100`)).body)).toEqual([
      'm3@example.org',
      'm1@example.org',
    ]);
    // Every condition must hold.
    expect(recipients((await log('?metadata.order_id=o-100&metadata.region=eu')).body)).toEqual([
      'm1@example.org',
    ]);
    expect((await log('?metadata.order_id=o-999')).body).toContain('No messages match these filters.');
    // The service the dashboard (and the admin API) search with.
    const page = await ctx.services.notifications.search({
      projectId: other.projectId,
      metadata: { order_id: 'o-100' },
      limit: 10,
    });
    expect(page.rows.map((row) => row.recipient)).toEqual(['m5@example.org']);
  });

  it('says what is wrong with a condition no message could match, and pages keep the conditions', async () => {
    const bad = await log('?metadata=order%20id%3Dx');
    expect(bad.statusCode).toBe(200);
    expect(bad.body).toContain('data-testid="filter-error"');
    expect(bad.body).toContain('Invalid &#39;metadata.order id&#39; filter');
    const noEquals = await log('?metadata=order_id');
    expect(noEquals.body).toContain('A metadata filter is KEY=VALUE, e.g. order_id=o-77');

    for (let i = 0; i < 55; i++)
      await sendOk(ctx.app, apiKey, {
        template: 'welcome',
        to: `p${i}@example.org`,
        metadata: { batch: 'b-1' },
      });
    const first = await log('?metadata=batch%3Db-1');
    const older = /href="(\/messages\?[^"]*before=\d+[^"]*)"/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
    expect(older).toContain('metadata.batch=b-1');
    expect(recipients((await log(older!.slice('/messages'.length))).body)).toEqual(
      Array.from({ length: 5 }, (_, i) => `p${4 - i}@example.org`),
    );
  });
});

describe(`the delivery log's status filter (${backend})`, () => {
  it('finds the canceled messages apart from the others that failed, and keeps the choice', async () => {
    const { apiKey: key, projectId: project } = await seedProject(ctx.services, {
      template: { name: 'welcome', subject: 'Hi', text: 'Hello' },
    });
    const scheduled = async (to: string) =>
      (
        await sendOk(ctx.app, key, {
          template: 'welcome',
          to,
          send_at: new Date(Date.now() + 86_400_000).toISOString(),
        })
      ).request_id;
    const canceled = await scheduled('canceled@example.org');
    await scheduled('failed@example.org');
    await scheduled('waiting@example.org');
    const cancel = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/${canceled}`,
      headers: { authorization: `Bearer ${key}` },
    });
    expect(cancel.statusCode).toBe(200);
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ state: 'failed', error_message: 'SMTP 550 5.1.1 <failed@example.org>: no such user' })
      .where('recipient', '=', 'failed@example.org')
      .execute();
    const log = async (status: string) => {
      const page = await app.inject({
        url: `/messages?project=${project}&status=${status}`,
        cookies: { herald_session: session },
      });
      expect(page.statusCode).toBe(200);
      return page.body;
    };
    const recipients = (body: string) =>
      [...body.matchAll(/<td class="wrap">([^<]*@[^<]*)<\/td>/g)].map((m) => m[1]);

    const onlyCanceled = await log('canceled');
    expect(recipients(onlyCanceled)).toEqual(['canceled@example.org']);
    expect(onlyCanceled).toContain('<option value="canceled" selected>canceled</option>');
    expect(onlyCanceled).not.toContain('data-testid="filter-error"');
    // Failed is the API's state: a canceled message is one of them.
    expect(recipients(await log('failed'))).toEqual(['failed@example.org', 'canceled@example.org']);
    expect(recipients(await log('queued'))).toEqual(['waiting@example.org']);
  });
});

describe(`the log pages' filters that cannot be applied (${backend})`, () => {
  const get = (url: string) => app.inject({ url, cookies: { herald_session: session } });
  const problems = (body: string) =>
    [
      ...(/data-testid="filter-error">([\s\S]*?)<\/div>/.exec(body)?.[1] ?? '').matchAll(/<p>([^<]*)<\/p>/g),
    ].map((m) => m[1]);

  it('are named on the delivery log, not silently dropped', async () => {
    const page = await get(`/messages?status=bounced&project=abc&from=yesterday&to=2026-13-45T10:00`);
    expect(page.statusCode).toBe(200);
    expect(problems(page.body)).toEqual([
      'No project is named &#39;abc&#39;: showing every project.',
      'Status &#39;bounced&#39; is not one of queued, sending, sent, failed, canceled: showing every status.',
      'From &#39;yesterday&#39; is not a UTC time like 2026-11-30T09:00: left out.',
      'Until &#39;2026-13-45T10:00&#39; is not a UTC time like 2026-11-30T09:00: left out.',
    ]);
    // The list is still shown, unfiltered, with the way back to no filters.
    expect(page.body).toContain('href="/messages">Clear</a>');
    expect(problems((await get('/messages?project=987654')).body)).toEqual([
      'No project has the id &#39;987654&#39;.',
    ]);
    expect(problems((await get('/messages?project=0')).body)).toEqual([
      'No project has the id &#39;0&#39;: showing every project.',
    ]);
    // A day the month does not have is not taken as a day of the next month.
    expect(problems((await get('/messages?from=2026-11-31T09:00&to=2026-02-30T09:00')).body)).toEqual([
      'From &#39;2026-11-31T09:00&#39; is not a UTC time like 2026-11-30T09:00: left out.',
      'Until &#39;2026-02-30T09:00&#39; is not a UTC time like 2026-11-30T09:00: left out.',
    ]);
    // A filter takes one value: the first is used, and the page says so.
    const twice = await get('/messages?status=sent&status=failed');
    expect(problems(twice.body)).toEqual(['Status is given more than once: only the first value is used.']);
    expect(twice.body).toContain('<option value="sent" selected>');
    // A long value is cut on whole characters.
    const long = await get(`/messages?status=${'a'.repeat(39)}%F0%9F%98%80${'b'.repeat(5)}`);
    expect(problems(long.body)[0]).toContain(`&#39;${'a'.repeat(39)}\u{1F600}…&#39;`);
    // An empty form field is no filter, and a valid one no problem.
    const plain = await get(`/messages?status=&project=${projectId}&from=&to=`);
    expect(plain.body).not.toContain('data-testid="filter-error"');
    // A project's name is taken as well as its id.
    const { name } = await ctx.services.projects.get(projectId);
    const byName = await get(`/messages?project=${encodeURIComponent(name)}`);
    expect(byName.body).not.toContain('data-testid="filter-error"');
    expect(byName.body).toContain(`<option value="${projectId}" selected>`);
  });

  it('are named on the API log, and a status code outside the menu is shown in it', async () => {
    const page = await get('/api-logs?status=abc&project=987654');
    expect(problems(page.body)).toEqual([
      'No project has the id &#39;987654&#39;.',
      'Status code &#39;abc&#39; is not an HTTP status code (100–599): showing every code.',
    ]);
    const teapot = await get('/api-logs?status=418');
    expect(teapot.body).not.toContain('data-testid="filter-error"');
    expect(teapot.body).toContain('<option value="418" selected>418</option>');
  });
});

describe(`canceling a message from its page (${backend})`, () => {
  const client = () => dashboardClient(app, session);

  it('cancels a scheduled message as the API does, once', async () => {
    const request_id = await sendScheduled('jane@example.org');
    const before = await client().get(`/messages/${request_id}`);
    expect(before.body).toContain('data-testid="cancel-message"');

    const canceled = await client().post(`/messages/${request_id}/cancel`, {}, csrfOf(before));
    expect(canceled.statusCode).toBe(303);
    expect(canceled.headers.location).toBe(`/messages/${request_id}?notice=canceled`);
    const after = await client().get(canceled.headers.location as string);
    expect(after.body).toContain('data-testid="message-status">canceled<');
    expect(after.body).toContain('Canceled: it will not be sent.');
    expect(after.body).not.toContain('data-testid="cancel-message"');
    const status = await ctx.app.inject({
      url: `/api/v1/notifications/${request_id}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(status.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });

    // The notice is about this message's state: a link with it to a message not canceled shows none.
    const other = await sendOk(ctx.app, apiKey, {
      template: 'welcome',
      to: 'sam@example.org',
      data: { user_name: 'Sam', password: 'x' },
    });
    await ctx.services.storage.db
      .updateTable('notifications')
      .set({ state: 'failed', error_message: 'SMTP 550 5.1.1 no such user' })
      .where('request_id', '=', other.request_id)
      .execute();
    expect((await client().get(`/messages/${other.request_id}?notice=canceled`)).body).not.toContain(
      'Canceled: it will not be sent.',
    );

    const again = await client().post(`/messages/${request_id}/cancel`, {}, csrfOf(before));
    expect(again.statusCode).toBe(409);
    expect(again.body).toContain(
      'Notification can no longer be canceled: it is being sent, or it was sent or failed already.',
    );
  });

  it('needs the form of a signed-in admin', async () => {
    const request_id = await sendScheduled('jane@example.org');
    const forged = await client().post(`/messages/${request_id}/cancel`, {}, null);
    expect(forged.statusCode).toBe(403);
    const anonymous = await app.inject({ method: 'POST', url: `/messages/${request_id}/cancel` });
    expect(anonymous.statusCode).toBe(403);
    expect((await ctx.services.notifications.status(projectId, request_id)).status).toBe('queued');
  });
});
