import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { adminClient, ok, refusal, type AdminClient } from '../helpers/admin.js';
import { expectError } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * Templates and layouts over the management API (product.md §11, §13): a PUT sets a whole
 * template (default variant, locales, layout) as one version, the same content again makes none;
 * versions are listed and rolled back; what does not parse is refused with its line and column,
 * as the CLI and the dashboard refuse it.
 */

let ctx: TestContext;
let admin: AdminClient;
let project: string;

beforeAll(async () => {
  ctx = await createTestContext();
  admin = await adminClient(ctx.app, ctx.services);
  project = (await seedProject(ctx.services)).name;
});
afterAll(() => ctx.close());

const path = (rest: string) => `/projects/${project}${rest}`;

describe(`templates (${backend})`, () => {
  const welcome = {
    subject: 'Welcome {{user_name}}',
    text: 'Hello {{user_name}}',
    html: '<p>Hello {{user_name}}</p>',
  };
  const fr = { subject: 'Bienvenue {{user_name}}', text: 'Bonjour {{user_name}}' };

  it('are created and replaced by PUT, one version per change and none for the same content', async () => {
    const created = ok(await admin.put(path('/templates/welcome'), welcome), 201);
    expect(created).toMatchObject({
      name: 'welcome',
      version: 1,
      outcome: 'created',
      placeholders: ['user_name'],
      locales: {},
    });
    const again = ok(await admin.put(path('/templates/welcome'), welcome));
    expect(again).toMatchObject({ version: 1, outcome: 'unchanged' });

    const localized = ok(
      await admin.put(path('/templates/welcome'), {
        ...welcome,
        locales: { 'fr-ca': fr, de: { ...fr, html: '' } },
      }),
    );
    expect(localized).toMatchObject({
      version: 2,
      outcome: 'updated',
      locales: { 'fr-CA': { ...fr, html: null }, de: { ...fr, html: null } },
    });
    const read = ok(await admin.get(path('/templates/welcome')));
    const { outcome: _, ...template } = localized;
    expect(read).toEqual(template);

    // What a PUT leaves out is not kept: here the locales and the HTML body.
    const plain = ok(await admin.put(path('/templates/welcome'), { subject: 'Hi', text: 'Hello' }));
    expect(plain).toMatchObject({ version: 3, outcome: 'updated', html: null, locales: {} });
    const listed = ok<{ templates: { name: string; version: number }[] }>(
      await admin.get(path('/templates')),
    );
    expect(listed.templates.find((t) => t.name === 'welcome')).toMatchObject({ version: 3 });
    expect(await ctx.services.templates.get(project, 'welcome')).toMatchObject({ version: 3, subject: 'Hi' });
  });

  it('list their versions newest first and roll back to one as a new version', async () => {
    const versions = ok<{ versions: { version: number; locales: string[]; note: string | null }[] }>(
      await admin.get(path('/templates/welcome/versions')),
    );
    expect(versions.versions.map((v) => [v.version, [...v.locales].sort()])).toEqual([
      [3, []],
      [2, ['de', 'fr-CA']],
      [1, []],
    ]);
    const restored = ok(await admin.post(path('/templates/welcome/rollback'), { version: 2 }));
    expect(restored).toMatchObject({
      version: 4,
      subject: welcome.subject,
      locales: { 'fr-CA': { subject: fr.subject } },
    });
    const newest = ok<{ versions: { version: number; note: string | null }[] }>(
      await admin.get(path('/templates/welcome/versions')),
    );
    expect(newest.versions[0]).toMatchObject({ version: 4, note: 'rollback to 2' });
    expect(restored).toMatchObject({ outcome: 'updated' });
    // Version 2's content is the current content now: restoring it again makes no version.
    const again = ok(await admin.post(path('/templates/welcome/rollback'), { version: 2 }));
    expect(again).toMatchObject({ version: 4, outcome: 'unchanged' });
    const same = ok<{ versions: { version: number }[] }>(
      await admin.get(path('/templates/welcome/versions')),
    );
    expect(same.versions[0]?.version).toBe(4);
    for (const version of [99, 0])
      expectError(
        await admin.post(path('/templates/welcome/rollback'), { version }),
        400,
        await refusal(() => ctx.services.templates.rollback(project, 'welcome', version)),
      );
    expectError(
      await admin.post(path('/templates/welcome/rollback'), { version: '2' }),
      400,
      "Invalid 'version' (a whole number)",
    );
  });

  it('refuse what does not parse with its line and column, in the CLI’s words, saving nothing', async () => {
    const broken = [
      { subject: 'Hi {{#if x}}', text: 'Hello' },
      { subject: 'Hi', text: 'line one\nline {{ two' },
      { subject: 'Hi', text: 'Hello', html: '<p>{{/each}}</p>' },
    ];
    for (const body of broken) {
      const expected = await refusal(() =>
        ctx.services.templates.create(project, { name: 'broken', ...body }),
      );
      expect(expected).toMatch(/^Invalid template: (subject|text body|HTML body), line \d+, column \d+: /);
      expectError(await admin.put(path('/templates/broken'), body), 400, expected);
    }
    const localized = await admin.put(path('/templates/broken'), {
      subject: 'Hi',
      text: 'Hello',
      locales: { fr: { subject: '{{#if}}', text: 'x' } },
    });
    expectError(localized, 400, /^Invalid template: subject \(fr\), line 1, column \d+: /);
    expectError(await admin.get(path('/templates/broken')), 404, 'Template not found');
    const before = ok<{ version: number }>(await admin.get(path('/templates/welcome')));
    expectError(await admin.put(path('/templates/welcome'), broken[0]), 400, /^Invalid template: /);
    expect(ok<{ version: number }>(await admin.get(path('/templates/welcome'))).version).toBe(before.version);
  });

  it('refuse @content, which renders as nothing, in the CLI’s words, saving nothing', async () => {
    const body = { subject: 'Hi', text: 'Hello', html: '<main>{{{@content}}}</main>' };
    const expected = await refusal(() =>
      ctx.services.templates.create(project, { name: 'body-in-frame', ...body }),
    );
    expect(expected).toMatch(/^Invalid template: HTML body, line 1, column 10: @content renders as nothing/);
    expectError(await admin.put(path('/templates/body-in-frame'), body), 400, expected);
    expectError(await admin.get(path('/templates/body-in-frame')), 404, 'Template not found');
  });

  it('refuse names, sizes, locales and layouts the CLI refuses', async () => {
    const name = 'with space';
    expectError(
      await admin.put(path(`/templates/${encodeURIComponent(name)}`), { subject: 's', text: 't' }),
      400,
      await refusal(() => ctx.services.templates.create(project, { name, subject: 's', text: 't' })),
    );
    const cases: [Record<string, unknown>, string | RegExp][] = [
      [{ subject: ' ', text: 't' }, 'Subject must be 1–1000 characters'],
      [
        { subject: 's', text: 't', html: 'x'.repeat(512 * 1024 + 1) },
        'HTML body must be at most 524288 characters',
      ],
      [
        { subject: 's', text: 't', locales: { 'not a tag': { subject: 's', text: 't' } } },
        "Invalid locale 'not a tag' (a BCP 47 tag such as fr or fr-CA)",
      ],
      [
        {
          subject: 's',
          text: 't',
          locales: { fr: { subject: 's', text: 't' }, FR: { subject: 's', text: 't' } },
        },
        'Locale "FR" is given twice or is not a locale',
      ],
      [{ subject: 's', text: 't', layout: 'nope' }, 'Layout not found: nope'],
      [{ subject: 's' }, "Missing 'text'"],
      [
        { subject: 's', text: 't', locales: { fr: { subject: 's', text: 't', cc: 'x' } } },
        "Unknown field 'locales.fr.cc'",
      ],
    ];
    for (const [body, error] of cases)
      expectError(await admin.put(path('/templates/sized'), body), 400, error);
    expectError(
      await admin.put(path('/templates/huge'), { subject: 's', text: 'x'.repeat(8 * 1024 * 1024) }),
      413,
      'Request body is larger than 8 MiB',
    );
  });

  it('are deleted, and another project’s are not found', async () => {
    const other = await seedProject(ctx.services);
    ok(await admin.put(path('/templates/doomed'), { subject: 's', text: 't' }), 201);
    expectError(await admin.get(`/projects/${other.name}/templates/doomed`), 404, 'Template not found');
    expectError(await admin.delete(`/projects/${other.name}/templates/doomed`), 404, 'Template not found');
    expect(ok(await admin.delete(path('/templates/doomed')))).toEqual({ deleted: true, name: 'doomed' });
    for (const response of [
      await admin.get(path('/templates/doomed')),
      await admin.delete(path('/templates/doomed')),
      await admin.get(path('/templates/doomed/versions')),
      await admin.post(path('/templates/doomed/rollback'), { version: 1 }),
    ])
      expectError(response, 404, 'Template not found');
  });
});

describe(`layouts (${backend})`, () => {
  it('are created and replaced by PUT, used by templates, and not deleted while used', async () => {
    const created = ok(
      await admin.put(path('/layouts/frame'), {
        html: '<main>{{{content}}}</main>',
        text: '-- {{content}} --',
      }),
      201,
    );
    expect(created).toMatchObject({
      name: 'frame',
      html: '<main>{{{content}}}</main>',
      text: '-- {{content}} --',
    });
    const changed = ok(await admin.put(path('/layouts/frame'), { text: '== {{content}} ==' }));
    expect(changed).toMatchObject({ id: created.id, html: null, text: '== {{content}} ==' });
    expect(ok(await admin.get(path('/layouts/frame')))).toEqual(changed);
    // Put again as it is (a later millisecond): nothing changes, not even its time.
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(ok(await admin.put(path('/layouts/frame'), { text: '== {{content}} ==' }))).toEqual(changed);
    expect(ok<{ layouts: unknown[] }>(await admin.get(path('/layouts'))).layouts).toEqual([changed]);

    const framed = ok(
      await admin.put(path('/templates/framed'), { subject: 's', text: 'body', layout: 'frame' }),
      201,
    );
    expect(framed).toMatchObject({ layout: 'frame' });
    expectError(
      await admin.delete(path('/layouts/frame')),
      409,
      'Layout frame is used by 1 template (framed); attach them elsewhere first',
    );
    ok(await admin.put(path('/templates/framed'), { subject: 's', text: 'body' }));
    expect(ok(await admin.delete(path('/layouts/frame')))).toEqual({ deleted: true, name: 'frame' });
  });

  it('are created by one of many PUTs at once, and updated by the others', async () => {
    const puts = await Promise.all(
      Array.from({ length: 12 }, (_, i) => admin.put(path('/layouts/raced'), { text: `${i} {{content}}` })),
    );
    expect(puts.map((response) => response.statusCode).sort((a, b) => a - b)).toEqual([
      ...Array(11).fill(200),
      201,
    ]);
    expect(ok(await admin.delete(path('/layouts/raced')))).toEqual({ deleted: true, name: 'raced' });
  });

  it('refuse a frame without its content placeholder, and are 404 when not there', async () => {
    const body = { html: '<main>no content</main>' };
    expectError(
      await admin.put(path('/layouts/bare'), body),
      400,
      await refusal(() => ctx.services.layouts.create(project, { name: 'bare', ...body })),
    );
    expectError(await admin.put(path('/layouts/bare'), {}), 400, 'A layout needs an HTML or a text frame');
    for (const response of [
      await admin.get(path('/layouts/bare')),
      await admin.delete(path('/layouts/bare')),
    ])
      expectError(response, 404, 'Layout not found: bare');
  });
});
