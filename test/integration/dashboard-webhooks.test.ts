import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOTIFICATION_EVENTS } from '../../src/domain/events.js';
import { SUPPRESSION_PAGE } from '../../src/services/suppressions.js';
import { addSuppressions } from '../../src/storage/suppressions.js';
import { backend } from '../helpers/database.js';
import { csrfOf, dashboardApp, dashboardClient } from '../helpers/dashboard.js';
import { sendOk } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * The dashboard's webhook and suppression pages through `inject`: the secret shown once, the event
 * filter, enable/disable/delete, test events and replays as rows in the outbox, the suppression
 * list, and that every route stays inside the project of its URL and needs the CSRF token.
 */

let ctx: TestContext;
let app: FastifyInstance;
let session: string;
let csrf: string;
let projectA: number;
let projectB: number;
let apiKeyA: string;

const HOOK = 'http://127.0.0.1:9/hook';

beforeAll(async () => {
  ctx = await createTestContext();
  ({ app, session } = await dashboardApp(ctx));
  ({ projectId: projectA, apiKey: apiKeyA } = await seedProject(ctx.services, { name: 'shop-a' }));
  ({ projectId: projectB } = await seedProject(ctx.services, { name: 'shop-b' }));
  const page = await get(`/projects/${projectA}/webhooks`);
  csrf = csrfOf(page);
});
afterAll(async () => {
  await app?.close();
  await ctx?.close();
});

const db = () => ctx.services.storage.db;

const get = (url: string): Promise<LightMyRequestResponse> => dashboardClient(app, session).get(url);

/** A form POST as the browser sends it; repeated fields (checkboxes) as arrays. */
const post = (
  url: string,
  fields: Record<string, string | readonly string[]> = {},
  token: string | null = csrf,
): Promise<LightMyRequestResponse> => dashboardClient(app, session).post(url, fields, token);

async function createEndpoint(
  projectId: number,
  fields: Record<string, string | readonly string[]> = {},
): Promise<{ id: number; secret: string; response: LightMyRequestResponse }> {
  const response = await post(`/projects/${projectId}/webhooks`, { url: HOOK, ...fields });
  expect(response.statusCode).toBe(201);
  const secret = /value="(whsec_[A-Za-z0-9+/=]+)"/.exec(response.body)![1]!;
  const id = Number(/\/webhooks\/(\d+)"/.exec(response.body)![1]);
  return { id, secret, response };
}

const endpointRow = (id: number) =>
  db().selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();

const deliveriesOf = (endpointId: number) =>
  db()
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as ev', 'ev.id', 'd.event_id')
    .select(['d.id', 'd.event_id', 'd.state', 'd.project_id', 'ev.type', 'ev.webhook_id', 'ev.payload'])
    .where('d.endpoint_id', '=', endpointId)
    .orderBy('d.id')
    .execute();

describe(`webhook pages (${backend})`, () => {
  it('shows a new endpoint’s secret once; the list and the endpoint page never show it', async () => {
    const { id, secret, response } = await createEndpoint(projectA);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(response.body).toContain('It is shown only once');
    const row = (await endpointRow(id))!;
    expect(row).toMatchObject({ project_id: projectA, url: HOOK, events: null, enabled: 1 });
    expect(row.secret_enc).not.toContain(secret);
    expect(ctx.services.openWebhookSecret(row.secret_enc)).toBe(secret);

    const list = await get(`/projects/${projectA}/webhooks`);
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain(HOOK);
    expect(list.body).toContain('All events');
    expect(list.body).toContain('aria-current="page">Webhooks</a>');
    expect(list.body).not.toContain('whsec_');
    const endpoint = await get(`/projects/${projectA}/webhooks/${id}`);
    expect(endpoint.statusCode).toBe(200);
    expect(endpoint.body).toContain(HOOK);
    expect(endpoint.body).not.toContain('whsec_');
    expect(endpoint.body).toContain('No deliveries yet');
  });

  it('stores the ticked events as the endpoint’s filter; all or none ticked is every event', async () => {
    const some = await createEndpoint(projectA, { events: ['notification.failed', 'notification.sent'] });
    expect((await endpointRow(some.id))!.events).toBe('["notification.sent","notification.failed"]');
    const one = await createEndpoint(projectA, { events: 'notification.bounced' });
    expect((await endpointRow(one.id))!.events).toBe('["notification.bounced"]');
    const all = await createEndpoint(projectA, { events: [...NOTIFICATION_EVENTS] });
    expect((await endpointRow(all.id))!.events).toBeNull();

    const list = await get(`/projects/${projectA}/webhooks`);
    const row = list.body.slice(list.body.indexOf(`/webhooks/${some.id}"`));
    expect(row.slice(0, row.indexOf('</tr>'))).toMatch(/notification\.sent.*notification\.failed/s);
  });

  it('answers bad input with the form again and an error, never a 500', async () => {
    const before = await db().selectFrom('webhook_endpoints').select('id').execute();
    const cases: [Record<string, string | string[]>, string][] = [
      [{ url: 'ftp://example.org/hook' }, 'Webhook URL must start with http:// or https://'],
      [{ url: '' }, 'Webhook URL is required'],
      [{ url: '"><img src=x onerror=alert(1)>' }, 'Webhook URL must not contain spaces'],
      [{ url: 'https://' }, 'Webhook URL is not a valid URL'],
      [{ url: HOOK, events: ['notification.sent', 'notification.exploded'] }, 'Unknown event'],
    ];
    for (const [fields, message] of cases) {
      const response = await post(`/projects/${projectA}/webhooks`, fields);
      expect({ status: response.statusCode, fields }).toEqual({ status: 400, fields });
      expect(response.body).toContain('class="alert error"');
      expect(response.body).toContain(message);
      expect(response.body).not.toContain('whsec_');
    }
    // The typed value comes back escaped in the field, never as markup.
    const echoed = await post(`/projects/${projectA}/webhooks`, { url: '"><img src=x onerror=alert(1)>' });
    expect(echoed.body).toContain('value="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"');
    expect(echoed.body).not.toContain('<img src=x');
    // Ticked boxes stay ticked.
    const ticked = await post(`/projects/${projectA}/webhooks`, {
      url: 'nope',
      events: 'notification.failed',
    });
    expect(ticked.body).toContain('value="notification.failed" checked');
    expect(ticked.body).not.toContain('value="notification.sent" checked');
    expect(await db().selectFrom('webhook_endpoints').select('id').execute()).toEqual(before);
  });

  it('disables and enables an endpoint, back to the page the button was on', async () => {
    const { id } = await createEndpoint(projectA);
    const off = await post(`/projects/${projectA}/webhooks/${id}/disable`);
    expect(off.statusCode).toBe(303);
    expect(off.headers.location).toBe(`/projects/${projectA}/webhooks?notice=disabled`);
    expect((await endpointRow(id))!.enabled).toBe(0);
    const list = await get(off.headers.location!);
    expect(list.body).toContain('Endpoint disabled.');
    const page = await get(`/projects/${projectA}/webhooks/${id}`);
    expect(page.body).toContain('This endpoint is disabled');
    expect(page.body).not.toContain('Send test event');

    const on = await post(`/projects/${projectA}/webhooks/${id}/enable`, { back: 'endpoint' });
    expect(on.statusCode).toBe(303);
    expect(on.headers.location).toBe(`/projects/${projectA}/webhooks/${id}?notice=enabled`);
    expect((await endpointRow(id))!.enabled).toBe(1);
    // Any other "back" value goes to the list, never elsewhere.
    const odd = await post(`/projects/${projectA}/webhooks/${id}/enable`, { back: '//evil.example' });
    expect(odd.headers.location).toBe(`/projects/${projectA}/webhooks?notice=enabled`);
  });

  it('queues a webhook.test delivery for that endpoint only, and shows it', async () => {
    const { id } = await createEndpoint(projectA);
    const other = await createEndpoint(projectA);
    const sent = await post(`/projects/${projectA}/webhooks/${id}/test`);
    expect(sent.statusCode).toBe(303);
    expect(sent.headers.location).toBe(`/projects/${projectA}/webhooks/${id}?notice=test`);
    const rows = await deliveriesOf(id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ type: 'webhook.test', state: 'pending', project_id: projectA });
    expect(JSON.parse(rows[0]!.payload)).toMatchObject({
      type: 'webhook.test',
      data: { endpoint_id: id, project: 'shop-a' },
    });
    expect(await deliveriesOf(other.id)).toEqual([]);

    const page = await get(sent.headers.location!);
    expect(page.body).toContain('Test event queued.');
    expect(page.body).toContain('webhook.test');
    expect(page.body).toContain(rows[0]!.webhook_id);
    expect(page.body).toContain('data-testid="next-attempt"');
    expect(page.body).toContain('Not attempted yet.');
    // Pending: the list refreshes itself.
    expect(page.body).toContain('hx-trigger="every 2s"');
    // A second click while the first test waits queues nothing more, and says why.
    const again = await post(`/projects/${projectA}/webhooks/${id}/test`);
    expect(again.headers.location).toBe(`/projects/${projectA}/webhooks/${id}?notice=test-waiting`);
    expect(await deliveriesOf(id)).toHaveLength(1);
    expect((await get(again.headers.location!)).body).toContain(
      'A test event is already waiting for this endpoint, ahead of its other deliveries',
    );

    // A disabled endpoint is not called, so no test is queued for it.
    await post(`/projects/${projectA}/webhooks/${other.id}/disable`);
    const refused = await post(`/projects/${projectA}/webhooks/${other.id}/test`);
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('This endpoint is disabled. Enable it first');
    expect(await deliveriesOf(other.id)).toEqual([]);
  });

  it('shows every attempt, escaped, and replays a delivery as a new one of the same event', async () => {
    const { id } = await createEndpoint(projectA);
    await post(`/projects/${projectA}/webhooks/${id}/test`);
    const [first] = await deliveriesOf(id);
    const hostile = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">';
    const now = Date.now();
    await db()
      .insertInto('webhook_attempts')
      .values([
        {
          delivery_id: first!.id,
          attempt: 1,
          started_at: now - 5000,
          latency_ms: 10_000,
          status_code: null,
          excerpt: null,
          error: 'No answer within 10 s',
        },
        {
          delivery_id: first!.id,
          attempt: 2,
          started_at: now,
          latency_ms: 42,
          status_code: 200,
          excerpt: hostile,
          error: null,
        },
      ])
      .execute();
    await db()
      .updateTable('webhook_deliveries')
      .set({ state: 'succeeded', attempts: 2, last_status_code: 200 })
      .where('id', '=', first!.id)
      .execute();

    const page = await get(`/projects/${projectA}/webhooks/${id}`);
    expect(page.body).toContain('2 attempts');
    expect(page.body).toContain('No answer within 10 s');
    expect(page.body).toContain('42 ms');
    expect(page.body).toContain(
      '&lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;',
    );
    expect(page.body).not.toContain(hostile);
    expect(page.body).not.toContain('hx-trigger');

    const replayed = await post(`/projects/${projectA}/webhooks/${id}/deliveries/${first!.id}/replay`);
    expect(replayed.statusCode).toBe(303);
    expect(replayed.headers.location).toBe(`/projects/${projectA}/webhooks/${id}?notice=replayed`);
    const rows = await deliveriesOf(id);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({ event_id: first!.event_id, state: 'pending', type: 'webhook.test' });
    expect(rows[1]!.webhook_id).toBe(first!.webhook_id);
    const after = await get(replayed.headers.location!);
    expect(after.body).toContain('Replay queued');
    expect(after.body.split(first!.webhook_id).length - 1).toBe(2);

    const missing = await post(`/projects/${projectA}/webhooks/${id}/deliveries/99999999/replay`);
    expect(missing.statusCode).toBe(404);
    const malformed = await post(`/projects/${projectA}/webhooks/${id}/deliveries/1x/replay`);
    expect(malformed.statusCode).toBe(400);
    expect(await deliveriesOf(id)).toHaveLength(2);

    // A disabled endpoint is not called: a replay for it is refused, not left waiting unseen.
    await post(`/projects/${projectA}/webhooks/${id}/disable`);
    const refused = await post(`/projects/${projectA}/webhooks/${id}/deliveries/${first!.id}/replay`);
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('This endpoint is disabled. Enable it first');
    await expect(ctx.services.webhooks.replay(projectA, id, first!.id)).rejects.toThrow(
      'The endpoint is disabled; enable it first',
    );
    await expect(ctx.services.webhooks.sendTest(projectA, id)).rejects.toThrow('The endpoint is disabled');
    expect(await deliveriesOf(id)).toHaveLength(2);
  });

  it('pages deliveries newest first with a before cursor', async () => {
    const { id } = await createEndpoint(projectA);
    await ctx.services.webhooks.sendTest(projectA, id);
    const [test] = await deliveriesOf(id);
    for (let i = 0; i < 26; i++) await ctx.services.webhooks.replay(projectA, id, test!.id);
    const ids = (await deliveriesOf(id)).map((d) => d.id).reverse();
    const first = await get(`/projects/${projectA}/webhooks/${id}`);
    expect(first.body.split('data-testid="delivery"').length - 1).toBe(25);
    expect(first.body).toContain(`/deliveries/${ids[0]}/replay`);
    expect(first.body).not.toContain(`/deliveries/${ids[25]}/replay`);
    expect(first.body).toContain(`?before=${ids[24]}`);
    const second = await get(`/projects/${projectA}/webhooks/${id}?before=${ids[24]}`);
    expect(second.body.split('data-testid="delivery"').length - 1).toBe(2);
    expect(second.body).toContain('« Newest');
    expect(second.body).not.toContain('Older »');
    // A paged view does not poll: it is not where new deliveries appear.
    expect(second.body).not.toContain('hx-trigger');
    expect((await get(`/projects/${projectA}/webhooks/${id}?before=junk`)).statusCode).toBe(200);
  });

  it('deletes an endpoint with its deliveries', async () => {
    const { id } = await createEndpoint(projectA);
    await post(`/projects/${projectA}/webhooks/${id}/test`);
    const deleted = await post(`/projects/${projectA}/webhooks/${id}/delete`);
    expect(deleted.statusCode).toBe(303);
    expect(deleted.headers.location).toBe(`/projects/${projectA}/webhooks?notice=deleted`);
    expect(await endpointRow(id)).toBeUndefined();
    expect(await deliveriesOf(id)).toEqual([]);
    expect((await get(`/projects/${projectA}/webhooks/${id}`)).statusCode).toBe(404);
    expect((await post(`/projects/${projectA}/webhooks/${id}/delete`)).statusCode).toBe(404);
  });

  it('never shows or changes another project’s endpoint through this project’s URLs', async () => {
    const theirs = await createEndpoint(projectB);
    await post(`/projects/${projectB}/webhooks/${theirs.id}/test`);
    const [delivery] = await deliveriesOf(theirs.id);
    const before = { row: await endpointRow(theirs.id), deliveries: await deliveriesOf(theirs.id) };

    const list = await get(`/projects/${projectA}/webhooks`);
    expect(list.body).not.toContain(`/webhooks/${theirs.id}"`);
    const a = `/projects/${projectA}/webhooks/${theirs.id}`;
    const attempts: [string, Promise<LightMyRequestResponse>][] = [
      ['page', get(a)],
      ['disable', post(`${a}/disable`)],
      ['enable', post(`${a}/enable`)],
      ['test', post(`${a}/test`)],
      ['delete', post(`${a}/delete`)],
      ['replay', post(`${a}/deliveries/${delivery!.id}/replay`)],
    ];
    for (const [what, response] of attempts) {
      const r = await response;
      expect({ what, status: r.statusCode }).toEqual({ what, status: 404 });
      expect(r.body).not.toContain(HOOK);
    }
    // Their delivery through one of our endpoints is not found either.
    const ours = await createEndpoint(projectA);
    const crossed = await post(`/projects/${projectA}/webhooks/${ours.id}/deliveries/${delivery!.id}/replay`);
    expect(crossed.statusCode).toBe(404);
    expect({ row: await endpointRow(theirs.id), deliveries: await deliveriesOf(theirs.id) }).toEqual(before);
    expect(await deliveriesOf(ours.id)).toEqual([]);
  });

  it('answers malformed and unknown ids with 400 and 404 pages', async () => {
    const cases: [string, number][] = [
      [`/projects/${projectA}/webhooks/abc`, 400],
      [`/projects/${projectA}/webhooks/-1`, 400],
      [`/projects/${projectA}/webhooks/99999999`, 404],
      [`/projects/${projectA}/webhooks/0`, 404],
      ['/projects/99999999/webhooks', 404],
      ['/projects/no-such-project/webhooks', 404],
    ];
    for (const [url, status] of cases) {
      const r = await get(url);
      expect({ url, status: r.statusCode }).toEqual({ url, status });
      expect(r.headers['content-type']).toMatch(/^text\/html/);
    }
    // A project's name in place of its id goes on to the same page at the id.
    const named = await get('/projects/shop-a/webhooks');
    expect(named.statusCode).toBe(302);
    expect(named.headers.location).toBe(`/projects/${projectA}/webhooks`);
  });

  it('refuses every change without the session’s CSRF token', async () => {
    const { id } = await createEndpoint(projectA);
    const before = await db().selectFrom('webhook_endpoints').selectAll().orderBy('id').execute();
    for (const token of [null, 'wrong-token']) {
      const forms: [string, Record<string, string>][] = [
        [`/projects/${projectA}/webhooks`, { url: HOOK }],
        [`/projects/${projectA}/webhooks/${id}/disable`, {}],
        [`/projects/${projectA}/webhooks/${id}/delete`, {}],
        [`/projects/${projectA}/webhooks/${id}/test`, {}],
        [`/projects/${projectA}/suppressions`, { email: 'csrf@example.org' }],
      ];
      for (const [url, fields] of forms) {
        const r = await post(url, fields, token);
        expect({ url, token, status: r.statusCode }).toEqual({ url, token, status: 403 });
      }
    }
    expect(await db().selectFrom('webhook_endpoints').selectAll().orderBy('id').execute()).toEqual(before);
    expect(await deliveriesOf(id)).toEqual([]);
    expect(await ctx.services.suppressions.list(projectA)).toEqual([]);
  });
});

describe(`suppression page (${backend})`, () => {
  const page = (query = '') => get(`/projects/${projectA}/suppressions${query}`);

  it('adds, lists and removes an address', async () => {
    const empty = await page();
    expect(empty.statusCode).toBe(200);
    expect(empty.body).toContain('No suppressed addresses');
    expect(empty.body).toContain('aria-current="page">Suppressions</a>');

    const added = await post(`/projects/${projectA}/suppressions`, { email: ' Jane@Example.org ' });
    expect(added.statusCode).toBe(303);
    expect(added.headers.location).toBe(`/projects/${projectA}/suppressions?notice=added`);
    expect(await ctx.services.suppressions.list(projectA)).toMatchObject([
      { email: 'jane@example.org', reason: 'manual', request_id: null },
    ]);
    const listed = await get(added.headers.location!);
    expect(listed.body).toContain('Address added to the suppression list');
    expect(listed.body).toMatch(/<td class="wrap mono">jane@example\.org<\/td>/);
    expect(listed.body).toContain('manual');
    // Not on another project's list.
    expect((await get(`/projects/${projectB}/suppressions`)).body).not.toContain(
      '<td class="wrap mono">jane@example.org',
    );

    const removed = await post(`/projects/${projectA}/suppressions/remove`, { email: 'jane@example.org' });
    expect(removed.statusCode).toBe(303);
    expect(removed.headers.location).toBe(`/projects/${projectA}/suppressions?notice=removed`);
    expect(await ctx.services.suppressions.list(projectA)).toEqual([]);
    const again = await post(`/projects/${projectA}/suppressions/remove`, { email: 'jane@example.org' });
    expect(again.statusCode).toBe(400);
    expect(again.body).toContain('Not on the suppression list');
  });

  it('shows an invalid address as an error on the page, escaped', async () => {
    for (const email of ['not-an-email', '', '<img src=x onerror=alert(1)>']) {
      const r = await post(`/projects/${projectA}/suppressions`, { email });
      expect({ email, status: r.statusCode }).toEqual({ email, status: 400 });
      expect(r.body).toContain('class="alert error"');
      expect(r.body).toContain('Not an email address');
      expect(r.body).not.toContain('<img src=x');
    }
    expect(await ctx.services.suppressions.list(projectA)).toEqual([]);
  });

  it('removes only from the project of the URL', async () => {
    await ctx.services.suppressions.add(projectB, 'kept@example.org');
    const r = await post(`/projects/${projectA}/suppressions/remove`, { email: 'kept@example.org' });
    expect(r.statusCode).toBe(400);
    expect(await ctx.services.suppressions.list(projectB)).toMatchObject([{ email: 'kept@example.org' }]);
  });

  it('says an address is already listed, and keeps its entry', async () => {
    await addSuppressions(db(), [
      {
        projectId: projectA,
        email: 'bounced@example.org',
        reason: 'hard_bounce',
        requestId: null,
        detail: 'SMTP 550 5.1.1 <bounced@example.org>: user unknown',
        now: Date.now() - 60_000,
      },
    ]);
    const before = await ctx.services.suppressions.list(projectA);
    const again = await post(`/projects/${projectA}/suppressions`, { email: 'Bounced@Example.org' });
    expect(again.statusCode).toBe(303);
    expect(again.headers.location).toBe(`/projects/${projectA}/suppressions?notice=kept`);
    const listed = await get(again.headers.location!);
    expect(listed.body).toContain('Address already on the suppression list: its entry is kept as it was.');
    expect(listed.body).not.toContain('Address added to the suppression list');
    expect(await ctx.services.suppressions.list(projectA)).toEqual(before);
    await ctx.services.suppressions.remove(projectA, 'bounced@example.org');
  });

  it('shows automatic entries with their message and detail, and pages the list', async () => {
    const { request_id } = await sendOk(ctx.app, apiKeyA, {
      template: 'user_created',
      to: 'gone@example.org',
    });
    const now = Date.now();
    await addSuppressions(db(), [
      {
        projectId: projectA,
        email: 'gone@example.org',
        reason: 'hard_bounce',
        requestId: request_id,
        detail: 'SMTP 550 5.1.1 <gone@example.org>: user unknown',
        now: now + 60_000,
      },
      ...Array.from({ length: SUPPRESSION_PAGE }, (_, i) => ({
        projectId: projectA,
        email: `old-${String(i).padStart(3, '0')}@example.org`,
        reason: 'complaint' as const,
        requestId: null,
        detail: 'abuse',
        now: now - i * 1000,
      })),
    ]);
    const first = await page();
    expect(first.body.split('data-testid="suppression"').length - 1).toBe(SUPPRESSION_PAGE);
    expect(first.body).toContain(`href="/messages/${request_id}"`);
    expect(first.body).toContain('hard bounce');
    expect(first.body).toContain('SMTP 550 5.1.1 &lt;gone@example.org&gt;: user unknown');
    expect(first.body).toContain(`?offset=${SUPPRESSION_PAGE}`);
    const second = await page(`?offset=${SUPPRESSION_PAGE}`);
    expect(second.body.split('data-testid="suppression"').length - 1).toBe(1);
    expect(second.body).toContain('old-099@example.org');
    expect(second.body).toContain('« Newest');
    expect(second.body).not.toContain('Older »');
    expect((await page('?offset=-5')).statusCode).toBe(200);
  });
});

describe(`message page (${backend})`, () => {
  it('shows when a sent message bounced', async () => {
    const { request_id } = await sendOk(ctx.app, apiKeyA, { template: 'user_created', to: 'b@example.org' });
    const sentAt = Date.UTC(2030, 0, 2, 3, 4, 5);
    await db()
      .updateTable('notifications')
      .set({
        state: 'failed',
        sent_at: sentAt,
        bounced_at: sentAt + 60_000,
        error_message: 'Bounced: smtp; 550 5.1.1 user unknown',
        bounce_type: 'hard',
        bounce_category: 'user_unknown',
        bounce_status: '5.1.1',
        bounce_diagnostic: 'smtp; 550 5.1.1 user unknown',
      })
      .where('request_id', '=', request_id)
      .execute();
    const r = await get(`/messages/${request_id}`);
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('<dt>Bounced at</dt><dd data-testid="bounced-at">2030-01-02 03:05:05 UTC</dd>');
    expect(r.body).toContain('Bounced: smtp; 550 5.1.1 user unknown');
    // Why, in one word.
    expect(r.body).toContain(
      '<span class="badge failed">hard</span> <span class="mono" data-testid="bounce-category">user_unknown</span>',
    );
  });
});
