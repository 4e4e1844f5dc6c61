import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOTIFICATION_EVENTS } from '../../src/domain/events.js';
import { addSuppressions } from '../../src/storage/suppressions.js';
import { backend } from '../helpers/database.js';
import { adminClient, ok, refusal, type AdminClient } from '../helpers/admin.js';
import { expectError } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * A project's SMTP relay, suppression list and webhook endpoints over the management API
 * (product.md §13), with the CLI's words for what they refuse and 404 for what is not there.
 */

let ctx: TestContext;
let admin: AdminClient;
let project: { projectId: number; name: string };

beforeAll(async () => {
  ctx = await createTestContext();
  admin = await adminClient(ctx.app, ctx.services);
  project = await seedProject(ctx.services);
});
afterAll(() => ctx.close());

const path = (rest: string) => `/projects/${project.name}${rest}`;

describe(`SMTP settings (${backend})`, () => {
  it('are set exactly as given, shown without passwords, and removed', async () => {
    expect(ok(await admin.get(path('/smtp')))).toEqual({ configured: false, relays: [] });
    const set = ok(
      await admin.put(path('/smtp'), {
        url: 'smtp://mailer:s3cret-pass@mail.example:2525',
        fallback_url: 'smtps://backup:other-pass@backup.example',
        from_email: 'no-reply@shop.example',
        from_name: 'Shop',
      }),
    );
    expect(set).toMatchObject({
      project_id: project.projectId,
      host: 'mail.example',
      port: 2525,
      security: 'auto',
      username: 'mailer',
      has_password: true,
      from_email: 'no-reply@shop.example',
      from_name: 'Shop',
      fallback: {
        host: 'backup.example',
        port: 465,
        security: 'tls',
        username: 'backup',
        has_password: true,
      },
    });
    const shown = ok(await admin.get(path('/smtp')));
    expect(shown).toMatchObject({ configured: true, host: 'mail.example', has_password: true });
    expect(shown.relays).toEqual([
      { role: 'primary', relay: 'mail.example:2525', source: 'project', up: true },
      { role: 'fallback', relay: 'backup.example:465', source: 'project', up: true },
    ]);
    for (const body of [set, shown]) expect(JSON.stringify(body)).not.toMatch(/s3cret|other-pass/);

    // What a PUT leaves out is not kept.
    const plain = ok(await admin.put(path('/smtp'), { url: 'smtp://mail.example:2525' }));
    expect(plain).toMatchObject({ fallback: null, from_email: null, has_password: false, username: null });

    expect(ok(await admin.delete(path('/smtp')))).toEqual({ cleared: true });
    expect(ok(await admin.delete(path('/smtp')))).toEqual({ cleared: false });
    expect(await ctx.services.smtpSettings.get(project.projectId)).toBeNull();
  });

  it('refuse what `herald smtp set` refuses, in its words', async () => {
    const cases: [Record<string, unknown>, () => Promise<unknown>][] = [
      [
        { url: 'http://mail.example' },
        () => ctx.services.smtpSettings.setFromUrl(project.name, 'http://mail.example'),
      ],
      [{ url: 'not a url' }, () => ctx.services.smtpSettings.setFromUrl(project.name, 'not a url')],
      [
        { url: 'smtp://mail.example?security=maybe' },
        () => ctx.services.smtpSettings.setFromUrl(project.name, 'smtp://mail.example?security=maybe'),
      ],
      [
        { url: 'smtp://mail.example', fallback_url: 'smtp://mail.example' },
        () =>
          ctx.services.smtpSettings.setFromUrl(project.name, 'smtp://mail.example', {
            fallbackUrl: 'smtp://mail.example',
          }),
      ],
      [
        { url: 'smtp://mail.example', from_email: 'nobody' },
        () =>
          ctx.services.smtpSettings.setFromUrl(project.name, 'smtp://mail.example', { fromEmail: 'nobody' }),
      ],
    ];
    for (const [body, viaService] of cases)
      expectError(await admin.put(path('/smtp'), body), 400, await refusal(viaService));
    expectError(await admin.put(path('/smtp'), {}), 400, "Missing 'url'");
    // A relay's from name is bounded as a project's is.
    expectError(
      await admin.put(path('/smtp'), { url: 'smtp://mail.example', from_name: 'N'.repeat(201) }),
      400,
      'From name must be at most 200 characters',
    );
    // And it may not be shown reversed.
    expectError(
      await admin.put(path('/smtp'), { url: 'smtp://mail.example', from_name: 'Shop\u202epohs' }),
      400,
      'From name may not contain a direction override (U+202A–U+202E, U+2066–U+2069)',
    );
    // A password with a % of its own, in the main URL or the fallback's.
    const percent = 'SMTP URL password has a % that starts no %XX escape: write a % as %25';
    expectError(await admin.put(path('/smtp'), { url: 'smtp://u:50%off@mail.example' }), 400, percent);
    expectError(
      await admin.put(path('/smtp'), {
        url: 'smtp://mail.example',
        fallback_url: 'smtp://u:p%ZZ@backup.example',
      }),
      400,
      percent,
    );
    expect(await ctx.services.smtpSettings.get(project.projectId)).toBeNull();
  });

  it('refuse a new primary that is the fallback kept, which would send each retry to it again', async () => {
    const settings = ctx.services.smtpSettings;
    await settings.setFromUrl(project.name, 'smtp://mail.example', {
      fallbackUrl: 'smtp://backup.example:2526',
    });
    expect(await refusal(() => settings.setFromUrl(project.name, 'smtp://Backup.example:2526'))).toBe(
      'The fallback relay must be another host or port than the primary: the fallback kept, ' +
        'backup.example:2526, is the primary (give another fallback relay, or remove it)',
    );
    expect(await settings.get(project.projectId)).toMatchObject({
      host: 'mail.example',
      fallback: { host: 'backup.example', port: 2526 },
    });
    // Given with another fallback, or with none, it is taken.
    await settings.setFromUrl(project.name, 'smtp://backup.example:2526', { fallbackUrl: '' });
    expect(await settings.get(project.projectId)).toMatchObject({ host: 'backup.example', fallback: null });
    expect(ok(await admin.delete(path('/smtp')))).toEqual({ cleared: true });
  });
});

describe(`the suppression list (${backend})`, () => {
  it('takes addresses, lists them a page at a time, and gives them back', async () => {
    const added = ok(await admin.post(path('/suppressions'), { email: 'Jane+Tag@Example.ORG' }), 201);
    expect(added).toMatchObject({
      email: 'jane+tag@example.org',
      reason: 'manual',
      request_id: null,
      detail: null,
    });
    ok(await admin.post(path('/suppressions'), { email: 'sam@example.org' }), 201);
    ok(await admin.post(path('/suppressions'), { email: 'ann@example.org' }), 201);
    const all = ok<{ suppressions: { email: string }[]; next_offset: number | null }>(
      await admin.get(path('/suppressions')),
    );
    expect(all.suppressions.map((s) => s.email).sort()).toEqual([
      'ann@example.org',
      'jane+tag@example.org',
      'sam@example.org',
    ]);
    expect(all.next_offset).toBeNull();
    const first = ok<{ suppressions: { email: string }[]; next_offset: number | null }>(
      await admin.get(path('/suppressions?limit=2')),
    );
    expect(first.suppressions).toHaveLength(2);
    expect(first.next_offset).toBe(2);
    const rest = ok<{ suppressions: { email: string }[]; next_offset: number | null }>(
      await admin.get(path('/suppressions?limit=2&offset=2')),
    );
    expect([...first.suppressions, ...rest.suppressions].map((s) => s.email).sort()).toEqual(
      all.suppressions.map((s) => s.email).sort(),
    );
    expect(rest.next_offset).toBeNull();

    const removed = ok(
      await admin.delete(path(`/suppressions/${encodeURIComponent('JANE+tag@example.org')}`)),
    );
    expect(removed).toEqual({ removed: true, email: 'jane+tag@example.org' });
    expectError(
      await admin.delete(path(`/suppressions/${encodeURIComponent('jane+tag@example.org')}`)),
      404,
      'Not on the suppression list: "jane+tag@example.org"',
    );
    expectError(
      await admin.delete(path('/suppressions/not-an-address')),
      404,
      'Not on the suppression list: "not-an-address"',
    );
  });

  it('answers an address already listed, in any spelling, with 200 and its entry as it stands', async () => {
    const first = ok(await admin.post(path('/suppressions'), { email: 'kept@example.org' }), 201);
    const again = ok(await admin.post(path('/suppressions'), { email: 'Kept Person <KEPT@Example.ORG>' }));
    expect(again).toEqual(first);

    // A bounce's entry stays a bounce's, with its time and detail: adding it by hand changes nothing.
    const bouncedAt = Date.parse('2025-03-01T10:00:00.000Z');
    await addSuppressions(ctx.services.storage.db, [
      {
        projectId: project.projectId,
        email: 'bounced@example.org',
        reason: 'hard_bounce',
        requestId: null,
        detail: 'SMTP 550 5.1.1 user unknown',
        now: bouncedAt,
      },
    ]);
    const bounced = ok(await admin.post(path('/suppressions'), { email: 'Bounced@Example.org' }));
    expect(bounced).toEqual({
      email: 'bounced@example.org',
      reason: 'hard_bounce',
      created_at: '2025-03-01T10:00:00.000Z',
      request_id: null,
      detail: 'SMTP 550 5.1.1 user unknown',
    });
    for (const email of ['kept@example.org', 'bounced@example.org'])
      ok(await admin.delete(path(`/suppressions/${email}`)));
  });

  it('refuses what is not an address, and pages out of range', async () => {
    expectError(
      await admin.post(path('/suppressions'), { email: 'a@' }),
      400,
      await refusal(() => ctx.services.suppressions.add(project.name, 'a@')),
    );
    expectError(
      await admin.get(path('/suppressions?limit=0')),
      400,
      "Invalid 'limit' (a whole number from 1 to 1000)",
    );
    expectError(
      await admin.get(path('/suppressions?offset=-1')),
      400,
      "Invalid 'offset' (a whole number from 0 to 1000000000)",
    );
  });

  it('is the project’s own', async () => {
    const other = await seedProject(ctx.services);
    await ctx.services.suppressions.add(other.projectId, 'theirs@example.org');
    expect(JSON.stringify(ok(await admin.get(path('/suppressions'))))).not.toContain('theirs@example.org');
    expectError(await admin.delete(path('/suppressions/theirs@example.org')), 404);
  });
});

describe(`webhook endpoints (${backend})`, () => {
  it('are created with a secret shown once, listed, and deleted', async () => {
    const created = ok(
      await admin.post(path('/webhooks'), {
        url: 'https://hooks.example/herald',
        events: ['notification.failed'],
      }),
      201,
    );
    expect(created).toMatchObject({
      url: 'https://hooks.example/herald',
      events: ['notification.failed'],
      enabled: true,
    });
    expect(created.secret).toMatch(/^whsec_/);
    const all = ok(await admin.post(path('/webhooks'), { url: 'https://hooks.example/all' }), 201);
    expect(all.events).toEqual([...NOTIFICATION_EVENTS]);
    const listed = ok<{ webhooks: { id: number }[] }>(await admin.get(path('/webhooks')));
    expect(listed.webhooks.map((w) => w.id)).toEqual([created.id, all.id]);
    expect(JSON.stringify(listed)).not.toContain(String(created.secret));

    expect(ok(await admin.delete(path(`/webhooks/${String(created.id)}`)))).toEqual({
      deleted: true,
      id: created.id,
    });
    expectError(
      await admin.delete(path(`/webhooks/${String(created.id)}`)),
      404,
      `Webhook endpoint not found: ${String(created.id)}`,
    );
    expectError(await admin.delete(path('/webhooks/abc')), 404, 'Webhook endpoint not found: abc');
    // Ids and names are taken exactly as given: one with a space around it names nothing.
    expectError(await admin.delete(path(`/webhooks/%20${String(all.id)}`)), 404);
    expectError(await admin.get(`/projects/%20${project.name}/webhooks`), 404);
    expect(await ctx.services.webhooks.list(project.projectId)).toHaveLength(1);
    const other = await seedProject(ctx.services);
    expectError(await admin.delete(`/projects/${other.name}/webhooks/${String(all.id)}`), 404);
    expect(await ctx.services.webhooks.list(project.projectId)).toHaveLength(1);
  });

  it('refuse what `herald webhook create` refuses, in its words', async () => {
    const cases: [Record<string, unknown>, () => Promise<unknown>][] = [
      [
        { url: 'ftp://hooks.example' },
        () => ctx.services.webhooks.create(project.name, { url: 'ftp://hooks.example' }),
      ],
      [
        { url: 'https://hooks.example', events: ['notification.opened'] },
        () =>
          ctx.services.webhooks.create(project.name, {
            url: 'https://hooks.example',
            events: ['notification.opened'],
          }),
      ],
    ];
    for (const [body, viaService] of cases)
      expectError(await admin.post(path('/webhooks'), body), 400, await refusal(viaService));
    expectError(
      await admin.post(path('/webhooks'), { url: 'https://h.example', events: 'notification.sent' }),
      400,
      "Invalid 'events' (a list of strings)",
    );
    // A list given but empty is a mistake, not every event (leaving `events` out is every event).
    for (const events of [[], ['', ' ']])
      expectError(
        await admin.post(path('/webhooks'), { url: 'https://h.example', events }),
        400,
        /^No events named; events are notification\.sent, /,
      );
  });
});
