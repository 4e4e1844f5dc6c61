import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { csrfOf, dashboardSuite } from '../helpers/dashboard.js';
import { seedProject } from '../helpers/services.js';
import { passMillisecond } from '../helpers/wait.js';

/**
 * The template editor's "Send a test email" form through `inject`: a refused test keeps the saved
 * template on the page and says what was wrong; a test sent from a locale variant's page sends
 * that variant; the recipient starts as the project's contact address.
 */

const suite = dashboardSuite();
let projectId: number;
let csrf: string;

const EDIT = () => `/projects/${projectId}/templates/edit/user_created`;
const TEST = () => `/projects/${projectId}/templates/test/user_created`;

beforeAll(async () => {
  ({ projectId } = await seedProject(suite.ctx.services, { contactEmail: 'dev@shop.example' }));
  await suite.ctx.services.templates.create(projectId, {
    name: 'user_created',
    locale: 'fr',
    subject: 'Bienvenue {{user_name}}',
    text: 'Bonjour {{user_name}}.',
  });
  csrf = csrfOf(await suite.client.get(EDIT()));
});

/** An attribute's text as the browser reads it. */
const unescape = (value: string) =>
  value
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** A textarea's value as a browser reads it: HTML drops one line feed right after the tag. */
function textareaValue(page: LightMyRequestResponse, id: string): string {
  const inner = new RegExp(`<textarea[^>]*\\bid="${id}"[^>]*>([\\s\\S]*?)</textarea>`).exec(page.body)![1]!;
  return unescape(inner.replace(/^\r?\n/, ''));
}

/** The value of the input with this id on the page. */
function inputValue(page: LightMyRequestResponse, id: string): string | undefined {
  const tag = new RegExp(`<input[^>]*\\bid="${id}"[^>]*>`).exec(page.body)?.[0];
  return tag === undefined ? undefined : unescape(/\bvalue="([^"]*)"/.exec(tag)?.[1] ?? '');
}

describe('sending a test email from the template editor', () => {
  it('starts with the project contact address as the recipient', async () => {
    expect(inputValue(await suite.client.get(EDIT()), 'test-to')).toBe('dev@shop.example');
  });

  it('keeps the saved template on the page when the recipient is not an address, and says so', async () => {
    const page = await suite.client.post(TEST(), { data: '{"user_name":"Jane"}', to: 'not-an-email' }, csrf);
    expect(page.statusCode).toBe(400);
    expect(page.body).toContain('The recipient is not an email address');
    expect(inputValue(page, 'subject')).toBe('Welcome {{user_name}}');
    expect(page.body).toContain('Hello {{user_name}}, your role is {{role}}.');
    // The recipient as typed, to correct it.
    expect(inputValue(page, 'test-to')).toBe('not-an-email');
  });

  it('asks for a recipient when none is given', async () => {
    const page = await suite.client.post(TEST(), { data: '{}', to: '  ' }, csrf);
    expect(page.statusCode).toBe(400);
    expect(page.body).toContain('Enter the address to send the test email to.');
    expect(inputValue(page, 'subject')).toBe('Welcome {{user_name}}');
  });

  it('keeps the saved template when the sample data is not JSON', async () => {
    const page = await suite.client.post(TEST(), { data: '{not json', to: 'jane@example.org' }, csrf);
    expect(page.statusCode).toBe(400);
    expect(inputValue(page, 'subject')).toBe('Welcome {{user_name}}');
    expect(inputValue(page, 'test-to')).toBe('jane@example.org');
  });

  it('sends the variant whose page the test was sent from', async () => {
    const page = await suite.client.get(`${EDIT()}?locale=fr`);
    expect(inputValue(page, 'subject')).toBe('Bienvenue {{user_name}}');
    // The test form as the page has it: its hidden fields, and the recipient typed in.
    const form = new RegExp(`<form[^>]*action="${TEST()}"[^>]*>([\\s\\S]*?)</form>`).exec(page.body)![1]!;
    const hidden = Object.fromEntries(
      [...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [
        m[1]!,
        unescape(m[2]!),
      ]),
    );
    const { _csrf: token, ...fields } = hidden;
    const sent = await suite.client.post(TEST(), { ...fields, to: 'jeanne@example.org' }, token!);
    expect(sent.statusCode).toBe(303);
    const requestId = decodeURIComponent(/\/messages\/([^?]+)/.exec(sent.headers.location as string)![1]!);
    const row = await suite.ctx.services.storage.db
      .selectFrom('notifications')
      .select(['locale', 'recipient'])
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ locale: 'fr', recipient: 'jeanne@example.org' });
  });
});

describe("the test form's locale", () => {
  it("is checked as a send's locale is: a tag in another case is the same variant, anything else is refused", async () => {
    const sent = await suite.client.post(
      TEST(),
      { data: '{}', to: 'jeanne@example.org', locale: 'FR' },
      csrf,
    );
    expect(sent.statusCode).toBe(303);
    const requestId = decodeURIComponent(/\/messages\/([^?]+)/.exec(sent.headers.location as string)![1]!);
    const row = await suite.ctx.services.storage.db
      .selectFrom('notifications')
      .select('locale')
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow();
    expect(row.locale).toBe('fr');

    for (const locale of ['<img src=x onerror=alert(1)>', 'x'.repeat(3000), 'fr_FR']) {
      const refused = await suite.client.post(TEST(), { data: '{}', to: 'jeanne@example.org', locale }, csrf);
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('That is not a locale');
      expect(refused.body).not.toContain('<img src=x');
    }
  });
});

describe('the editor of a locale variant', () => {
  it('opens the variant for its tag in any case, and the default for anything else', async () => {
    const upper = await suite.client.get(`${EDIT()}?locale=FR`);
    expect(inputValue(upper, 'subject')).toBe('Bienvenue {{user_name}}');
    expect(upper.body).toContain('<input type="hidden" name="locale" value="fr">');
    const bad = await suite.client.get(`${EDIT()}?locale=${encodeURIComponent('fr_FR')}`);
    expect(bad.statusCode).toBe(200);
    expect(inputValue(bad, 'subject')).toBe('Welcome {{user_name}}');
    expect(bad.body).not.toContain('fr_FR');
  });
});

describe('saving the template editor', () => {
  it('makes no version when nothing changed, whatever line ends the browser sends', async () => {
    await suite.ctx.services.templates.create(projectId, {
      name: 'multiline',
      subject: 'Lines',
      text: '\nHello\n\nBye\n',
      html: '<p>Hello</p>\n<p>Bye</p>\n',
    });
    const url = `/projects/${projectId}/templates/edit/multiline`;
    const page = await suite.client.get(url);
    // As a browser posts the page back: each textarea as it reads it, its lines ended by CRLF
    // (HTML's form encoding).
    const crlf = (value: string) => value.replace(/\n/g, '\r\n');
    const saved = await suite.client.post(
      url,
      {
        subject: inputValue(page, 'subject')!,
        text: crlf(textareaValue(page, 'text')),
        html: crlf(textareaValue(page, 'html')),
        data: crlf('{\n  "name": "Jane"\n}'),
        layout: '',
        locale: '',
      },
      csrfOf(page),
    );
    expect(saved.statusCode).toBe(303);
    const template = await suite.ctx.services.templates.get(projectId, 'multiline');
    expect(template).toMatchObject({
      version: 1,
      text: '\nHello\n\nBye\n',
      html: '<p>Hello</p>\n<p>Bye</p>\n',
      sampleData: '{\n  "name": "Jane"\n}',
    });
  });

  it('keeps a template without sample data untouched when the generated sample comes back as it was', async () => {
    const created = await suite.ctx.services.templates.create(projectId, {
      name: 'no-sample',
      subject: 'Hi {{name}}',
      text: 'Hello {{name}}',
    });
    const url = `/projects/${projectId}/templates/edit/no-sample`;
    const page = await suite.client.get(url);
    const generated = textareaValue(page, 'data');
    expect(generated).toContain('"name"');
    await passMillisecond(created.updatedAt);
    const form = {
      subject: inputValue(page, 'subject')!,
      text: textareaValue(page, 'text'),
      html: '',
      data: generated.replace(/\n/g, '\r\n'),
      layout: '',
      locale: '',
    };
    expect((await suite.client.post(url, form, csrfOf(page))).statusCode).toBe(303);
    expect(await suite.ctx.services.templates.get(projectId, 'no-sample')).toEqual(created);
    // Sample data the user wrote is saved.
    const edited = { ...form, data: '{"name": "Ada"}' };
    expect((await suite.client.post(url, edited, csrfOf(page))).statusCode).toBe(303);
    expect(await suite.ctx.services.templates.get(projectId, 'no-sample')).toMatchObject({
      version: 1,
      sampleData: '{"name": "Ada"}',
    });
  });
});

describe('restoring a version from the history', () => {
  const ROLLBACK = () => `/projects/${projectId}/templates/rollback/user_created`;

  it('shows the history again with the reason when the version does not exist', async () => {
    const before = await suite.ctx.services.templates.get(projectId, 'user_created');
    for (const [version, reason] of [
      ['99', 'Template &quot;user_created&quot; has no version 99'],
      ['v1', 'Template &quot;user_created&quot; has no version v1'],
      [' ', 'Choose a version to restore'],
    ] as const) {
      const page = await suite.client.post(ROLLBACK(), { version }, csrf);
      expect(page.statusCode).toBe(400);
      expect(page.body).toMatch(new RegExp(`role="alert">${reason}</p>`));
      expect(page.body).toContain('data-testid="versions"');
    }
    expect((await suite.ctx.services.templates.get(projectId, 'user_created')).version).toBe(before.version);
  });

  it('restores an earlier version and says which, as which', async () => {
    const before = await suite.ctx.services.templates.get(projectId, 'user_created');
    await suite.ctx.services.templates.update(projectId, 'user_created', {
      subject: 'Changed {{user_name}}',
    });
    const restored = await suite.client.post(ROLLBACK(), { version: String(before.version) }, csrf);
    expect(restored.statusCode).toBe(303);
    const as = before.version + 2;
    expect((await suite.ctx.services.templates.get(projectId, 'user_created')).version).toBe(as);
    const page = await suite.client.get(restored.headers.location as string);
    expect(page.body).toContain(`Version ${before.version} restored as version ${as}.`);
  });

  it('makes no version when the version restored is the current content, and says so', async () => {
    const current = await suite.ctx.services.templates.get(projectId, 'user_created');
    const restored = await suite.client.post(ROLLBACK(), { version: String(current.version) }, csrf);
    expect(restored.statusCode).toBe(303);
    expect((await suite.ctx.services.templates.get(projectId, 'user_created')).version).toBe(current.version);
    const page = await suite.client.get(restored.headers.location as string);
    expect(page.body).toContain(`Version ${current.version} is the current content; nothing changed.`);
  });
});

describe('the template preview', () => {
  const PREVIEW = () => `/projects/${projectId}/templates/preview`;
  const MERGE_TAG = 'a Mailchimp merge tag (*|FNAME|*) would be sent as it is written';

  it('says what a save would refuse in text that renders, except in a part as it is stored', async () => {
    const legacy = 'Hello *|FNAME|*, {{user_name}}';
    await suite.ctx.services.templates.create(projectId, {
      name: 'legacy',
      subject: 'Hi',
      text: 'Hello LEGACY, {{user_name}}',
    });
    // A part written past the check of a save, as one saved before the rule is stored.
    for (const table of ['templates', 'template_variants'] as const)
      await suite.ctx.services.storage.db
        .updateTable(table)
        .set({ text_body: legacy })
        .where('text_body', '=', 'Hello LEGACY, {{user_name}}')
        .execute();
    const fields = { subject: 'Hi again', text: legacy, html: '', data: '{"user_name":"Jane"}', layout: '' };
    const stored = await suite.client.post(PREVIEW(), { ...fields, name: 'legacy', mode: 'edit' }, csrf);
    expect(stored.statusCode).toBe(200);
    expect(stored.body).toContain('Hello *|FNAME|*, Jane');
    expect(stored.body).not.toContain(MERGE_TAG);
    const pasted = await suite.client.post(PREVIEW(), { ...fields, name: 'pasted', mode: 'new' }, csrf);
    expect(pasted.body).toContain('Hello *|FNAME|*, Jane');
    expect(pasted.body).toContain(MERGE_TAG);
  });
});
