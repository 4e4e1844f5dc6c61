import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Messages } from '../../src/domain/errors.js';
import { backend } from '../helpers/database.js';
import { adminClient, ok, refusal, type AdminClient } from '../helpers/admin.js';
import { countNotifications, expectError, sendOk, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * The management API's projects (product.md §13): create, read, change, delete and a new key, a
 * project named by its name or id, with the errors the CLI and the dashboard give for the same input.
 */

let ctx: TestContext;
let admin: AdminClient;

beforeAll(async () => {
  ctx = await createTestContext();
  admin = await adminClient(ctx.app, ctx.services);
});
afterAll(() => ctx.close());

describe(`projects (${backend})`, () => {
  it('are created with a key shown once, then read, listed and changed by name or id', async () => {
    const created = ok(
      await admin.post('/projects', {
        name: 'shop',
        contact_email: 'ops@shop.example',
        from_email: 'no-reply@shop.example',
        from_name: 'Shop',
        quota: 100,
        quota_period: 'day',
      }),
      201,
    );
    expect(created).toMatchObject({ name: 'shop', quota: 100, quota_period: 'day', from_name: 'Shop' });
    const apiKey = String(created.api_key);
    expect(apiKey).toMatch(/^hrl_[0-9A-Za-z]{38}$/);
    expect(created.key_prefix).toBe(apiKey.slice(0, 12));
    await ctx.services.templates.create('shop', { name: 'user_created', subject: 'Hi', text: 'Hello' });
    await sendOk(ctx.app, apiKey, { template: 'user_created' });

    const byName = ok(await admin.get('/projects/shop'));
    const byId = ok(await admin.get(`/projects/${String(created.id)}`));
    expect(byId).toEqual(byName);
    expect(byName).toMatchObject({ id: created.id, quota_used: 1 });
    expect(new Date(String(byName.quota_reset)).getTime()).toBeGreaterThan(Date.now());
    const listed = ok<{ projects: Record<string, unknown>[] }>(await admin.get('/projects'));
    expect(listed.projects.map((p) => p.name)).toContain('shop');
    for (const body of [byName, listed]) expect(JSON.stringify(body)).not.toContain(apiKey);

    // A limit lowered below what was used keeps the count, and refuses the next send.
    await sendOk(ctx.app, apiKey, { template: 'user_created' });
    expect(ok(await admin.patch('/projects/shop', { quota: 1 }))).toMatchObject({ quota: 1 });
    expect(ok(await admin.get('/projects/shop'))).toMatchObject({ quota: 1, quota_used: 2 });
    expectError(await send(ctx.app, apiKey, { template: 'user_created' }), 402, Messages.quotaExceeded);

    const changed = ok(
      await admin.patch('/projects/shop', { quota: 'unlimited', from_name: null, name: 'store' }),
    );
    expect(changed).toMatchObject({
      name: 'store',
      quota: 'unlimited',
      from_name: null,
      contact_email: 'ops@shop.example',
    });
    expect(ok(await admin.get('/projects/store'))).toMatchObject({ quota_used: null, quota_reset: null });
  });

  it('change nothing, not even updated_at, when a PATCH gives every value as it is', async () => {
    const created = ok(
      await admin.post('/projects', { name: 'steady', from_name: 'Steady', quota: 50 }),
      201,
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (const same of [{}, { from_name: 'Steady', quota: 50 }, { name: 'steady ' }])
      expect(ok(await admin.patch('/projects/steady', same)).updated_at, JSON.stringify(same)).toBe(
        created.updated_at,
      );
    const changed = ok(await admin.patch('/projects/steady', { from_name: 'Steady Co', quota: 50 }));
    expect(changed).toMatchObject({ from_name: 'Steady Co', quota: 50 });
    expect(changed.updated_at).not.toBe(created.updated_at);
  });

  it('answer 404 for a project that is not there, on every route that names one', async () => {
    for (const response of await Promise.all([
      admin.get('/projects/nowhere'),
      admin.patch('/projects/nowhere', { from_name: 'x' }),
      admin.delete('/projects/nowhere'),
      admin.post('/projects/nowhere/rotate-key'),
      admin.get('/projects/999999'),
      admin.get('/projects/nowhere/templates'),
      admin.get('/projects/nowhere/templates/t'),
      admin.put('/projects/nowhere/templates/t', { subject: 's', text: 't' }),
      admin.delete('/projects/nowhere/templates/t'),
      admin.get('/projects/nowhere/templates/t/versions'),
      admin.post('/projects/nowhere/templates/t/rollback', { version: 1 }),
      admin.get('/projects/nowhere/layouts'),
      admin.get('/projects/nowhere/layouts/l'),
      admin.put('/projects/nowhere/layouts/l', { text: '{{content}}' }),
      admin.delete('/projects/nowhere/layouts/l'),
      admin.get('/projects/nowhere/smtp'),
      admin.put('/projects/nowhere/smtp', { url: 'smtp://mail.example' }),
      admin.delete('/projects/nowhere/smtp'),
      admin.get('/projects/nowhere/suppressions'),
      admin.post('/projects/nowhere/suppressions', { email: 'a@example.org' }),
      admin.delete('/projects/nowhere/suppressions/a@example.org'),
      admin.get('/projects/nowhere/webhooks'),
      admin.post('/projects/nowhere/webhooks', { url: 'https://hooks.example/h' }),
      admin.delete('/projects/nowhere/webhooks/1'),
      admin.get('/projects/nowhere/notifications'),
    ]))
      expectError(response, 404, /^Project not found: (nowhere|999999)$/);
  });

  it('answer 409 for a name another project has, on create and on rename', async () => {
    await seedProject(ctx.services, { name: 'taken' });
    const { name } = await seedProject(ctx.services);
    expectError(
      await admin.post('/projects', { name: 'taken' }),
      409,
      'A project named "taken" already exists',
    );
    expectError(
      await admin.patch(`/projects/${name}`, { name: 'taken' }),
      409,
      'A project named "taken" already exists',
    );
  });

  it('refuse what the CLI and the dashboard refuse, in their words', async () => {
    const { name } = await seedProject(ctx.services);
    const cases: [Record<string, unknown>, () => Promise<unknown>][] = [
      [{ name: 'no/slash' }, () => ctx.services.projects.create({ name: 'no/slash' })],
      [{ name: '12345' }, () => ctx.services.projects.create({ name: '12345' })],
      [
        { name: 'ok', contact_email: 'not an address' },
        () => ctx.services.projects.create({ name: 'ok', contactEmail: 'not an address' }),
      ],
      [
        { name: 'ok', from_email: 'Jane <j@example.org>' },
        () => ctx.services.projects.create({ name: 'ok', fromEmail: 'Jane <j@example.org>' }),
      ],
      [
        { name: 'ok', from_name: 'x'.repeat(201) },
        () => ctx.services.projects.create({ name: 'ok', fromName: 'x'.repeat(201) }),
      ],
      [
        { name: 'ok', quota: 2_000_000_000 },
        () => ctx.services.projects.create({ name: 'ok', quotaLimit: 2_000_000_000 }),
      ],
      [
        { name: 'ok', quota_period: 'week' },
        () => ctx.services.projects.create({ name: 'ok', quotaPeriod: 'week' as 'day' }),
      ],
    ];
    for (const [body, viaService] of cases) {
      const expected = await refusal(viaService);
      expectError(await admin.post('/projects', body), 400, expected);
      const { name: _, ...change } = body;
      if (Object.keys(change).length > 0)
        expectError(await admin.patch(`/projects/${name}`, change), 400, expected);
    }
    expect(
      await refusal(() => ctx.services.projects.create({ name: 'ok', quotaPeriod: 'week' as 'day' })),
    ).toBe('Quota period must be hour, day or month');
    // Letters outside ASCII are refused, in words that say so.
    for (const refused of ['Ünï 日本', '-dash-first'])
      expect(await refusal(() => ctx.services.projects.create({ name: refused }))).toBe(
        'Project name must be 1–100 ASCII letters (A–Z, a–z), digits, spaces, dots, dashes or underscores, ' +
          'starting with a letter or digit, and not only digits',
      );
    expect((await ctx.services.projects.list()).map((p) => p.name)).not.toContain('ok');
  });

  it('get a new key: the old one is refused at once, the new one works', async () => {
    const { apiKey, name } = await seedProject(ctx.services);
    const rotated = ok(await admin.post(`/projects/${name}/rotate-key`));
    expect(rotated).toMatchObject({ name, key_prefix: String(rotated.api_key).slice(0, 12) });
    expectError(
      await send(ctx.app, apiKey, { template: 'user_created', to: 'a@example.org' }),
      401,
      'Invalid or missing API key',
    );
    await sendOk(ctx.app, String(rotated.api_key), { template: 'user_created', to: 'a@example.org' });
  });
});

describe(`deleting a project (${backend})`, () => {
  it('is refused while its mail waits, names how much, and changes nothing', async () => {
    const { apiKey, name, projectId } = await seedProject(ctx.services);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    await sendOk(ctx.app, apiKey, { template: 'user_created', to: 'a@example.org', send_at: later });
    await sendOk(ctx.app, apiKey, { template: 'user_created', to: 'b@example.org', send_at: later });
    for (const query of ['', '?force=false'])
      expectError(
        await admin.delete(`/projects/${name}${query}`),
        409,
        `Project ${name} has 2 notifications queued or being sent; wait until they are sent, or delete with force to discard them`,
      );
    expectError(
      await admin.delete(`/projects/${name}?force=yes`),
      400,
      `Invalid 'force' ("true" or "false")`,
    );
    expect(await countNotifications(ctx.services, projectId)).toBe(2);
    await sendOk(ctx.app, apiKey, { template: 'user_created', to: 'c@example.org' });
  });

  it('with force, deletes it and everything of it; its key is refused; others are untouched', async () => {
    const doomed = await seedProject(ctx.services);
    const kept = await seedProject(ctx.services);
    const { services } = ctx;
    await services.layouts.create(doomed.projectId, { name: 'frame', text: '-- {{content}} --' });
    await services.smtpSettings.setFromUrl(doomed.projectId, 'smtp://u:p@mail.example:587');
    await services.suppressions.add(doomed.projectId, 'gone@example.org');
    await services.webhooks.create(doomed.projectId, { url: 'https://hooks.example/h' });
    await sendOk(ctx.app, doomed.apiKey, { template: 'user_created', to: 'a@example.org' });
    await sendOk(ctx.app, kept.apiKey, { template: 'user_created', to: 'a@example.org' });

    const deleted = ok(await admin.delete(`/projects/${doomed.projectId}?force=true`));
    expect(deleted).toEqual({ deleted: true, id: doomed.projectId, name: doomed.name });

    expectError(await send(ctx.app, doomed.apiKey, { template: 'user_created', to: 'a@example.org' }), 401);
    expectError(await admin.get(`/projects/${doomed.name}`), 404, `Project not found: ${doomed.name}`);
    const db = services.storage.db;
    for (const table of [
      'templates',
      'template_layouts',
      'smtp_settings',
      'suppressions',
      'webhook_endpoints',
      'notifications',
    ] as const) {
      const rows = await db
        .selectFrom(table)
        .select('project_id')
        .where('project_id', '=', doomed.projectId)
        .execute();
      expect(rows, table).toEqual([]);
    }
    expect(await countNotifications(services, kept.projectId)).toBe(1);
    await sendOk(ctx.app, kept.apiKey, { template: 'user_created', to: 'b@example.org' });
    // The name can be used again.
    ok(await admin.post('/projects', { name: doomed.name }), 201);
  });

  it('without mail waiting needs no force', async () => {
    const { name } = await seedProject(ctx.services);
    expect(ok(await admin.delete(`/projects/${name}`))).toMatchObject({ deleted: true, name });
  });
});
