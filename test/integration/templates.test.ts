import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { HeraldError } from '../../src/domain/errors.js';
import { previewTemplate } from '../../src/services/template-preview.js';
import { settledStatus } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { passMillisecond } from '../helpers/wait.js';

/**
 * Templates people write (product.md §11), end to end: saved through the services, sent over
 * HTTP, rendered by the worker, received by a real SMTP server, and described by the status body.
 */

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({ HERALD_SMTP_URL: sink.url, HERALD_DELIVERY_POLL_MS: '20' });
  worker = createWorker(ctx.services);
  worker.start();
});
afterAll(async () => {
  await worker.stop();
  await ctx.close();
  await sink.stop();
});

async function send(apiKey: string, body: Record<string, unknown>) {
  return ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: body,
  });
}

async function delivered(apiKey: string, body: Record<string, unknown>) {
  const response = await send(apiKey, body);
  expect(response.statusCode).toBe(202);
  const requestId = response.json<{ request_id: string }>().request_id;
  const status = await settledStatus(ctx.app, apiKey, requestId);
  // The relay keeps a message before it answers 250, so a sent message is there already.
  const message =
    status.status === 'sent'
      ? sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId)
      : undefined;
  return { status, message };
}

async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    if (error instanceof HeraldError) return error.message;
    throw error;
  }
  throw new Error('accepted');
}

describe('templates with logic, layouts, locales and versions', () => {
  it('renders logic inside a layout, picks the locale variant, and says which version rendered', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    await layouts.create(projectId, {
      name: 'brand',
      html: '<main>{{{content}}}</main><footer>{{company}}</footer>',
      text: '{{content}}\n-- {{company}}',
    });
    await templates.create(projectId, {
      name: 'order',
      subject: 'Order {{id}}',
      text: '{{#each lines}}{{name}} x{{qty}}\n{{/each}}{{#if trial}}Trial{{/if}}',
      html: '<ul>{{#each lines}}<li>{{name}}</li>{{/each}}</ul>',
      layout: 'brand',
    });
    await templates.create(projectId, {
      name: 'order',
      locale: 'fr',
      subject: 'Commande {{id}}',
      text: '{{#each lines}}{{name}} ×{{qty}}\n{{/each}}',
    });
    const data = { id: 7, company: 'Acme & Co', trial: true, lines: [{ name: 'Tea <green>', qty: 2 }] };

    const fr = await delivered(apiKey, { template: 'order', to: 'a@example.org', locale: 'fr-CA', data });
    expect(fr.status).toMatchObject({ status: 'sent', template_locale: 'fr', template_version: 2 });
    expect(fr.message!.parsed.subject).toBe('Commande 7');
    expect(fr.message!.parsed.text?.trim()).toBe('Tea <green> ×2\n\n-- Acme & Co');

    const en = await delivered(apiKey, { template: 'order', to: 'a@example.org', locale: 'de', data });
    expect(en.status).toMatchObject({ template_locale: null, template_version: 2 });
    expect(en.message!.parsed.html).toBe(
      '<main><ul><li>Tea &lt;green&gt;</li></ul></main><footer>Acme &amp; Co</footer>',
    );
    expect(en.message!.parsed.text?.trim()).toBe('Tea <green> x2\nTrial\n-- Acme & Co');
  });

  it('keeps every version, rolls back as a new version, and delivers what the current one says', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    await templates.create(projectId, { name: 'note', subject: 'One', text: 'first' });
    await templates.update(projectId, 'note', { subject: 'Two', text: 'second' });
    const { template: rolled, outcome } = await templates.rollback(projectId, 'note', 1);
    expect(outcome).toBe('updated');
    expect(rolled).toMatchObject({ version: 3, subject: 'One', text: 'first' });
    expect((await templates.versions(projectId, 'note')).map((v) => [v.version, v.note])).toEqual([
      [3, 'rollback to 1'],
      [2, null],
      [1, null],
    ]);
    expect((await templates.version(projectId, 'note', 2)).variants['']).toEqual({
      subject: 'Two',
      text: 'second',
      html: null,
    });
    const { status, message } = await delivered(apiKey, { template: 'note', to: 'b@example.org' });
    expect(status).toMatchObject({ template_version: 3, template_locale: null });
    expect(message!.parsed.subject).toBe('One');
  });

  it('makes no version when a change gives the content it already has, and keeps its sample data', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    await templates.create(projectId, { name: 'same', subject: 'One', text: 'first', html: '<p>x</p>' });
    // As the editor's form saves it: every part, unchanged, and new sample data.
    const saved = await templates.update(projectId, 'same', {
      subject: 'One',
      text: 'first',
      html: '<p>x</p>',
      sampleData: '{"name":"Jane"}',
    });
    expect(saved).toMatchObject({ version: 1, sampleData: '{"name":"Jane"}' });
    expect((await templates.versions(projectId, 'same')).map((v) => v.version)).toEqual([1]);
    // Saved again exactly as it is, nothing changes: not even when it was last updated.
    await passMillisecond(saved.updatedAt);
    const again = await templates.update(projectId, 'same', {
      subject: 'One',
      text: 'first',
      sampleData: '{"name":"Jane"}',
    });
    expect(again).toEqual(saved);
    await passMillisecond(saved.updatedAt);
    expect((await templates.update(projectId, 'same', { sampleData: '{}' })).updatedAt).toBeGreaterThan(
      saved.updatedAt,
    );
    expect(await templates.update(projectId, 'same', { subject: 'Two' })).toMatchObject({ version: 2 });
  });

  it('rewrites a template saved before Handlebars when one part changes, so the others render the same bytes', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    const text = 'Dear {{this}}, use \\{{name}} {{! not a comment }} price {{0}} {{ 1 + 2 }}';
    const html = '<style>p { color: red }</style><p>{{{name}}} {{&name}} {{a/b}}}</p>';
    await templates.create(projectId, { name: 'legacy', subject: 'Hi {{name}}', text: 'x' });
    // As a database of an earlier release holds it: version 1 in the placeholder engine.
    await asEarlierRelease(projectId, 'legacy', { text_body: text, html_body: html }, 'placeholders');
    const data = { name: 'Jane <j>', this: 'Sir', 0: '10 EUR', a: { b: 'nope' } };

    const before = await delivered(apiKey, { template: 'legacy', to: 'a@example.org', data });
    expect(before.message!.parsed.text).toBe(
      'Dear Sir, use \\Jane <j> {{! not a comment }} price 10 EUR {{ 1 + 2 }}',
    );

    // A form sends the other parts back as they were saved; then the subject alone changes.
    await templates.update(projectId, 'legacy', { subject: 'Hello {{name}}', text, html });
    await templates.update(projectId, 'legacy', { subject: 'Hello {{name}}!' });
    const after = await delivered(apiKey, { template: 'legacy', to: 'a@example.org', data });
    expect(after.status).toMatchObject({ status: 'sent', template_version: 3 });
    expect(after.message!.parsed.subject).toBe('Hello Jane <j>!');
    expect(after.message!.parsed.text).toBe(before.message!.parsed.text);
    expect(after.message!.parsed.html).toBe(before.message!.parsed.html);
  });

  it('refuses a Liquid tag where a template or layout is saved, at its place; other braces are text', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    const condition = 'write {{#if value}}…{{else}}…{{/if}}';
    const refusals: [() => Promise<unknown>, string, string, string][] = [
      [
        () =>
          templates.create(projectId, {
            name: 'liquid',
            subject: 'Hi',
            text: 'Hello\n  {% if vip %}VIP{% endif %}',
          }),
        'text body, line 2, column 3',
        'if',
        condition,
      ],
      [
        () =>
          layouts.create(projectId, {
            name: 'frame',
            html: '<main>{{{content}}}</main>{%- for x in y -%}',
            text: null,
          }),
        'HTML body (layout), line 1, column 27',
        'for',
        'write {{#each list}}…{{/each}}',
      ],
      [
        () =>
          templates.create(projectId, {
            name: 'assigned',
            subject: 'Hi',
            text: 'ok',
            html: '<p>{{#if a}}\r\n  x {%- assign total = 3 -%}{{/if}}</p>',
          }),
        'HTML body, line 2, column 5',
        'assign',
        'send what it makes as a value',
      ],
      // The first in the source is named, inside a block or not, with lines ended by a lone \r too.
      [
        () =>
          templates.create(projectId, {
            name: 'first',
            subject: 'Hi',
            text: '{{#if a}}x\r{% unless y %}{{/if}}\n{% for z in zs %}',
          }),
        'text body, line 2, column 1',
        'unless',
        condition,
      ],
      // A Liquid tag with a Handlebars value in it is named where it opens, not at its end tag.
      [
        () =>
          templates.create(projectId, {
            name: 'mixed',
            subject: 'Hi',
            text: 'Dear {{name}},\n{% if {{vip}} %}VIP{% endif %}',
          }),
        'text body, line 2, column 1',
        'if',
        condition,
      ],
    ];
    for (const [save, where, tag, advice] of refusals)
      expect(await refusal(save)).toBe(
        `Invalid template: ${where}: a Liquid tag ({% ${tag} %}) would be sent as it is written: ${advice} ` +
          '(to show it as text, write its {% as {{"{%"}})',
      );
    // Text, all of these: in a comment it is no tag; written with {{"{%"}} it shows as text; a `{%`
    // that opens no Liquid tag is text, as it always was; nor is one cut off by a value and never
    // closed, as it is not without the value.
    const taken = [
      ['shown', 'Hi', '{{!-- was {% if vip %} --}}Write {{"{%"}} if vip %} in Liquid'],
      ['percent', 'Save 50%', 'Up to {% of 100 %}, or {%'],
      ['unclosed', 'Hi', 'Discount {% if pct, more {% if {{pct}} off'],
      ['unclosed-later', 'Hi', '{% for {{x}} is 100% {{y}}'],
    ] as const;
    for (const [name, subject, text] of taken) await templates.create(projectId, { name, subject, text });
    expect((await templates.get(projectId, 'percent')).text).toBe('Up to {% of 100 %}, or {%');
  });

  it("refuses Mailchimp's merge tags and Postmark's pm: values where saved; written as text they are sent", async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    const merge = (tag: string, advice: string) =>
      `a Mailchimp merge tag (*|${tag}|*) would be sent as it is written: ${advice} ` +
      '(to show it as text, write its *| as {{"*|"}})';
    const postmark = (name: string) =>
      `${name} is Postmark's and renders as nothing: Herald sets no value of its own; ` +
      'send it as a value of yours (an unsubscribe link as {{{unsubscribe_url}}}, say)';
    const refusals: [() => Promise<unknown>, string][] = [
      [
        () => templates.create(projectId, { name: 'mc', subject: 'Hi *|FNAME|*', text: 'x' }),
        `subject, line 1, column 4: ${merge('FNAME', 'write {{FNAME}} and send its value')}`,
      ],
      [
        () =>
          templates.create(projectId, {
            name: 'mc-if',
            subject: 'Hi',
            text: 'Hello\n{{#if a}}*|IF:VIP|*gold*|END:IF|*{{/if}}',
          }),
        `text body, line 2, column 10: ${merge('IF:VIP', 'write {{#if VIP}}…{{else}}…{{/if}}')}`,
      ],
      [
        () =>
          layouts.create(projectId, { name: 'mc', html: '{{{content}}}<p>*|MC:SUBJECT|*</p>', text: null }),
        `HTML body (layout), line 1, column 17: ${merge('MC:SUBJECT', 'send what it makes as a value')}`,
      ],
      [
        () => templates.create(projectId, { name: 'mc-sp', subject: 'Hi', text: 'Dear *| FNAME |*,' }),
        `text body, line 1, column 6: a Mailchimp merge tag (*| FNAME |*) would be sent as it is written: write {{FNAME}} and send its value (to show it as text, write its *| as {{"*|"}})`,
      ],
      [
        () =>
          templates.create(projectId, {
            name: 'mc-nbsp',
            subject: 'Hi',
            text: 'Dear *|\u00a0FNAME\u00a0|*,',
          }),
        `text body, line 1, column 6: a Mailchimp merge tag (*|\u00a0FNAME\u00a0|*) would be sent as it is written: write {{FNAME}} and send its value (to show it as text, write its *| as {{"*|"}})`,
      ],
      [
        () =>
          templates.create(projectId, { name: 'mc-not', subject: 'Hi', text: '*|IFNOT:VIP|*x*|END:IF|*' }),
        `text body, line 1, column 1: ${merge('IFNOT:VIP', 'write {{#unless VIP}}…{{/unless}}')}`,
      ],
      [
        () => templates.create(projectId, { name: 'mc-else', subject: 'Hi', text: 'a *|ELSEIF:GOLD|*' }),
        `text body, line 1, column 3: ${merge('ELSEIF:GOLD', 'write {{else if GOLD}}')}`,
      ],
      [
        () => templates.create(projectId, { name: 'mc-eq', subject: 'Hi', text: '*|IF:VIP=Gold|*x' }),
        `text body, line 1, column 1: ${merge('IF:VIP=Gold', 'send whether VIP=Gold holds as a value of its own (true or false) and test that with {{#if}}')}`,
      ],
      [
        () =>
          templates.create(projectId, {
            name: 'pm',
            subject: 'Hi',
            text: 'x',
            html: '<p>Bye</p>\n<a href="{{{ pm:unsubscribe }}}">Unsubscribe</a> *|UNSUB|*',
          }),
        `HTML body, line 2, column 14: ${postmark('pm:unsubscribe')}`,
      ],
      [
        () => templates.create(projectId, { name: 'pm-if', subject: 'Hi', text: '{{#if pm:x}}y{{/if}}' }),
        `text body, line 1, column 7: ${postmark('pm:x')}`,
      ],
    ];
    for (const [save, reason] of refusals) expect(await refusal(save)).toBe(`Invalid template: ${reason}`);
    expect((await templates.list(projectId)).map((t) => t.name)).toEqual(['user_created']);

    // Written as text, or in a comment, or with no name after it, or with lines between its
    // ends, `*|` goes out as it is.
    await templates.create(projectId, {
      name: 'shown',
      subject: 'Hi',
      text: 'Write {{"*|"}}FNAME|* in Mailchimp{{!-- was *|FNAME|* --}}; 2*|3|*4; pm: {{pm}}\n|*Item*|Price|*; a*|b|*; *|A\n|*; *|IF:a\nb|*',
    });
    const { message } = await delivered(apiKey, {
      template: 'shown',
      to: 'a@example.org',
      data: { pm: 'ok' },
    });
    expect(message!.parsed.text?.trimEnd()).toBe(
      'Write *|FNAME|* in Mailchimp; 2*|3|*4; pm: ok\n|*Item*|Price|*; a*|b|*; *|A\n|*; *|IF:a\nb|*',
    );
  });

  it('refuses names that would render blank where saved: hidden characters, and @content in a layout', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    const hidden = (name: string, code: string) =>
      `the name ${name} holds a character that cannot be seen (${code}), so no value's key matches it ` +
      'and it renders blank: type the name again';
    const refusals: [() => Promise<unknown>, string][] = [
      [
        () => templates.create(projectId, { name: 'zw', subject: 'Hi {{\u200bname}}', text: 'x' }),
        `subject, line 1, column 6: ${hidden('name', 'U+200B')}`,
      ],
      [
        () =>
          templates.create(projectId, {
            name: 'lrm',
            subject: 'Hi',
            text: 'a\n{{#if vip\u200e}}gold{{/if}}',
          }),
        `text body, line 2, column 7: ${hidden('vip', 'U+200E')}`,
      ],
      [
        () => layouts.create(projectId, { name: 'shy', html: '{{{content}}} {{com\u00adpany}}', text: null }),
        `HTML body (layout), line 1, column 17: ${hidden('company', 'U+00AD')}`,
      ],
    ];
    for (const [save, reason] of refusals) expect(await refusal(save)).toBe(`Invalid template: ${reason}`);
    expect((await templates.list(projectId)).map((t) => t.name)).toEqual(['user_created']);
    // Postmark's layout placeholder, in a layout, is named as what it is.
    expect(
      await refusal(() =>
        layouts.create(projectId, { name: 'pm', html: '<main>{{{@content}}}</main>', text: null }),
      ),
    ).toBe(
      'Invalid template: HTML body (layout), line 1, column 10: @content renders as nothing: Herald puts a ' +
        "template's body into its layout at {{{content}}} (HTML) or {{content}} (text), without the @",
    );
    expect(await layouts.list(projectId)).toEqual([]);
    // Seen characters are names' own: an accented name, or one in another script, is saved.
    await templates.create(projectId, { name: 'seen', subject: '{{prénom}} {{名前}}', text: 'x' });
  });

  it('refuses a template that does not parse, naming the part, line and column', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    expect(
      await refusal(() => templates.create(projectId, { name: 'bad', subject: 'Hi', text: 'a\n{{#if x}}b' })),
    ).toBe('Invalid template: text body, line 2, column 1: {{#if}} is not closed (its {{/if}} is missing)');
    await templates.create(projectId, { name: 'good', subject: 'Hi', text: 'ok' });
    expect(
      await refusal(() =>
        templates.update(projectId, 'good', { locale: 'fr', subject: 'Salut {{#x}}', text: 'ok' }),
      ),
    ).toMatch(/^Invalid template: subject \(fr\), line 1, column \d+: /);
    expect((await templates.get(projectId, 'good')).version).toBe(1);
  });

  it('refuses a part with more than 1,000 tags before parsing it, where it is saved and previewed', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    // 500 blocks are 1,000 tags: taken. One more value is refused, at its place.
    const blocks = '{{#if a}}x{{/if}}'.repeat(500);
    await templates.create(projectId, { name: 'many', subject: 'Hi', text: blocks });
    const tooMany = `${blocks}\n{{a}}`;
    const reason =
      'more than 1000 tags ({{…}}) in one part; repeat a part with #each rather than writing it out';
    expect(
      await refusal(() => templates.create(projectId, { name: 'more', subject: 'Hi', text: tooMany })),
    ).toBe(`Invalid template: text body, line 2, column 1: ${reason}`);
    expect(await refusal(() => templates.update(projectId, 'many', { html: `<p>${tooMany}</p>` }))).toBe(
      `Invalid template: HTML body, line 2, column 1: ${reason}`,
    );
    expect(await refusal(() => layouts.create(projectId, { name: 'l', text: tooMany }))).toBe(
      `Invalid template: text body (layout), line 2, column 1: ${reason}`,
    );
    // Ten thousand blocks (the size of a body that held an event loop for seconds) are refused as fast.
    expect(previewTemplate({ subject: 'Hi', text: '{{#if a}}x{{/if}}'.repeat(10_000) }, {}).error).toBe(
      `Invalid template: text body, line 1, column ${500 * 17 + 1}: ${reason}`,
    );
    // What a tag holds is bounded too, read as Handlebars reads it. Each of these took seconds to
    // parse (nested sub-expressions 20 s, hidden behind a string or a comment's `--~}}`).
    const save = (text: string) =>
      refusal(() => templates.create(projectId, { name: 'big', subject: 'Hi', text }));
    const nest = `${'(a '.repeat(4000)}b${')'.repeat(4000)}`;
    const parentheses = 'helper calls in parentheses are not supported';
    expect(await save(`Hi\n{{#if ${nest}}}y{{/if}}`)).toBe(
      `Invalid template: text body, line 2, column 7: ${parentheses}`,
    );
    expect(await save(`{{a "}}" ${nest}}}`)).toBe(
      `Invalid template: text body, line 1, column 10: ${parentheses}`,
    );
    expect(await save(`{{!-- x --~}}{{a ${nest}}}`)).toBe(
      `Invalid template: text body, line 1, column 18: ${parentheses}`,
    );
    expect(await save(`{{!-- x --~}}${'{{#if a}}x{{/if}}'.repeat(15_000)}`)).toMatch(/more than 1000 tags/);
    expect(await save(`{{${'a.'.repeat(200)}b}}`)).toBe(
      'Invalid template: text body, line 1, column 257: a tag longer than 256 characters',
    );
    expect(await save(`{{#if ${'a.'.repeat(120)}b}}y{{/if}}`.repeat(70))).toMatch(
      /^Invalid template: text body, line 1, column \d+: more than 8000 tokens in the tags of one part$/,
    );
    expect(await save(`{{#if a}}x${'{{else if b}}x'.repeat(200)}{{/if}}`)).toMatch(
      /^Invalid template: text body, line 1, column \d+: blocks nested more than 100 deep$/,
    );
    // What costs the lexer itself a pass over the rest of the part: {{!-- --}} comments, beyond
    // what the part's length leaves room for, and characters that can be no token.
    expect(await save(`${'{{!-- a note --}}'.repeat(1000)}${'x'.repeat(200_000)}`)).toMatch(
      /^Invalid template: text body, line 1, column \d+: too many \{\{!-- --\}\} comments for a part this long; /,
    );
    expect(await save(`{{${'['.repeat(250)}}}${'x'.repeat(200_000)}`)).toBe(
      'Invalid template: text body, line 1, column 3: unexpected character inside {{ }} (write \\{{ for literal braces)',
    );
    // Comments and escaped braces are text: neither tags nor long ones.
    await templates.create(projectId, {
      name: 'commented',
      subject: 'Hi',
      text: `{{~!-- ${'x }} {{ '.repeat(4_000)} --~}}${'\\{{not a tag}}'.repeat(2_000)} {{name}}`,
    });
    expect((await templates.get(projectId, 'many')).version).toBe(1);
  });

  it('previews a template that renders past a bound with its error and its placeholders', () => {
    const preview = previewTemplate(
      { subject: 'Re: {{topic}}', text: 'Hi {{name}}' },
      { topic: 'x'.repeat(2000) },
    );
    expect(preview).toMatchObject({
      error:
        'Template render failed: the subject is 2004 characters, more than 2000 (a long value in it belongs in the body)',
      placeholders: ['topic', 'name'],
      subject: '',
    });
  });

  it("names the first of another service's tags in a part's text, whichever service's it is", async () => {
    const { projectId } = await seedProject(ctx.services);
    const saveText = (text: string) =>
      refusal(() => ctx.services.templates.create(projectId, { name: 'pasted', subject: 'Hi', text }));
    expect(await saveText('<p>*|FNAME|* {% if vip %}x{% endif %}</p>')).toMatch(
      /^Invalid template: text body, line 1, column 4: a Mailchimp merge tag \(\*\|FNAME\|\*\)/,
    );
    expect(await saveText('{% if vip %}x{% endif %} *|FNAME|*')).toMatch(
      /^Invalid template: text body, line 1, column 1: a Liquid tag \(\{% if %\}\)/,
    );
    expect(await saveText('Hi\n{{{ pm:unsubscribe }}}\n{{@content}}')).toMatch(
      /^Invalid template: text body, line 2, column \d+: pm:unsubscribe is Postmark's/,
    );
    expect(await saveText('Hi\n{{@content}} {% if a %}{% endif %}')).toMatch(
      /^Invalid template: text body, line 2, column \d+: @content renders as nothing/,
    );
  });

  it('names the first problem of a template brought over from another service, the subject first, wherever it was found', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    // A helper Herald does not have is found by the compile, a merge tag by a rule of a save: the
    // author meets them in the order of the template, not of the checks.
    const brought = {
      name: 'brought',
      subject: 'Hi *|FNAME|*',
      text: 'Hello *|FNAME|*,\n{{#equals plan "pro"}}pro{{/equals}}',
    };
    expect(await refusal(() => templates.create(projectId, brought))).toMatch(
      /^Invalid template: subject, line 1, column 4: a Mailchimp merge tag \(\*\|FNAME\|\*\)/,
    );
    expect(await refusal(() => templates.create(projectId, { ...brought, subject: 'Hi {{FNAME}}' }))).toMatch(
      /^Invalid template: text body, line 1, column 7: a Mailchimp merge tag \(\*\|FNAME\|\*\)/,
    );
    expect(
      await refusal(() =>
        templates.create(projectId, {
          ...brought,
          subject: 'Hi {{FNAME}}',
          text: 'Hello {{FNAME}},\n{{#equals plan "pro"}}pro{{/equals}}',
        }),
      ),
    ).toMatch(/^Invalid template: text body, line 2, column 1: unknown helper 'equals'/);
    // And in a layout: its compile and its rules weighed by place alike.
    expect(
      await refusal(() =>
        ctx.services.layouts.create(projectId, {
          name: 'brought',
          html: '{{{content}}} *|LIST:COMPANY|* {{formatDate now}}',
          text: null,
        }),
      ),
    ).toMatch(/^Invalid template: HTML body \(layout\), line 1, column 15: a Mailchimp merge tag/);
  });

  it('previews a template holding another service’s tags as it would be sent, with what a save would say', () => {
    const preview = previewTemplate(
      { subject: 'Hi {{name}}', text: 'Hello *|FNAME|*, {{name}}' },
      { name: 'Jane' },
    );
    expect(preview).toMatchObject({
      subject: 'Hi Jane',
      text: 'Hello *|FNAME|*, Jane',
      placeholders: ['name'],
      error:
        'Invalid template: text body, line 1, column 7: a Mailchimp merge tag (*|FNAME|*) would be sent as it is written: ' +
        'write {{FNAME}} and send its value (to show it as text, write its *| as {{"*|"}})',
    });
    expect(previewTemplate({ subject: 'Hi', text: 'Hello {{name}}' }, { name: 'Jane' }).error).toBeNull();
    // A part as it is stored is not held to the rule, as a save of it is not.
    const saved = { subject: 'Hi {{name}}', text: 'Hello *|FNAME|*, {{name}}', html: null };
    expect(
      previewTemplate({ subject: 'Hello {{name}}', text: saved.text }, { name: 'Jane' }, null, saved),
    ).toMatchObject({ subject: 'Hello Jane', error: null });
  });

  it('refuses a raw block when saved: Handlebars reads it as a section over the data', async () => {
    const { projectId } = await seedProject(ctx.services);
    expect(
      await refusal(() =>
        ctx.services.templates.create(projectId, {
          name: 'prices',
          subject: 'Hi',
          text: 'Price: {{{{raw}}}}{{amount}}{{{{/raw}}}}',
        }),
      ),
    ).toBe(
      'Invalid template: text body, line 1, column 8: raw blocks ({{{{raw}}}}) are not supported; write \\{{ where braces should show',
    );
  });

  it('refuses @content in a template, where it renders as nothing, on every way a template is saved', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    const reason = (name: string) =>
      `@${name} renders as nothing: Herald puts a template's body into its layout at {{{content}}} (HTML) or {{content}} (text), without the @`;
    expect(
      await refusal(() =>
        templates.create(projectId, {
          name: 'framed',
          subject: 'Hi',
          text: 'Hello',
          html: '<main>\n  {{{@content}}}\n</main>',
        }),
      ),
    ).toBe(`Invalid template: HTML body, line 2, column 6: ${reason('content')}`);
    expect(
      await refusal(() =>
        templates.create(projectId, { name: 'framed', subject: 'Hi', text: '{{@content}}' }),
      ),
    ).toBe(`Invalid template: text body, line 1, column 3: ${reason('content')}`);
    // In any case: Handlebars' data variables are case-sensitive, and no other spelling is set either.
    expect(
      await refusal(() =>
        templates.create(projectId, { name: 'framed', subject: 'Hi', text: 'Hello', html: '{{{@Content}}}' }),
      ),
    ).toBe(`Invalid template: HTML body, line 1, column 4: ${reason('Content')}`);
    await templates.create(projectId, { name: 'framed', subject: 'Hi', text: 'Hello {{content}}' });
    // Inside a block, as a block's value, and in a locale variant.
    expect(
      await refusal(() =>
        templates.update(projectId, 'framed', { text: '{{#each items}}\n{{#if @content}}x{{/if}}{{/each}}' }),
      ),
    ).toBe(`Invalid template: text body, line 2, column 7: ${reason('content')}`);
    expect(
      await refusal(() =>
        templates.update(projectId, 'framed', {
          locale: 'fr',
          subject: 'Salut {{@content.title}}',
          text: 'x',
        }),
      ),
    ).toBe(`Invalid template: subject (fr), line 1, column 9: ${reason('content')}`);
    expect(
      await refusal(() =>
        templates.put(projectId, 'framed', { subject: 'Hi', text: 'Hello', html: '{{{@content}}}' }),
      ),
    ).toBe(`Invalid template: HTML body, line 1, column 4: ${reason('content')}`);
    expect((await templates.get(projectId, 'framed')).version).toBe(1);
  });

  it('still sends a template saved with @content before it was refused, and saves its other parts', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    const html = '<main>{{{@content}}}</main>';
    await createOfEarlierRelease(projectId, 'older', html);

    const before = await delivered(apiKey, { template: 'older', to: 'a@example.org' });
    expect(before.status.status).toBe('sent');
    expect(before.message!.parsed.html).toBe('<main></main>');
    // Its other parts change, as a form sends them (every part back) and as the CLI does (one part).
    await templates.update(projectId, 'older', { subject: 'Hello', text: 'x', html });
    await templates.update(projectId, 'older', { locale: 'fr', subject: 'Salut', text: 'y' });
    await templates.deleteVariant(projectId, 'older', 'fr');
    expect((await templates.put(projectId, 'older', { subject: 'Hello', text: 'x', html })).outcome).toBe(
      'unchanged',
    );
    expect(await templates.get(projectId, 'older')).toMatchObject({ version: 4, subject: 'Hello', html });
    // A part written anew is held to the rule.
    expect(await refusal(() => templates.update(projectId, 'older', { html: `${html}\n` }))).toMatch(
      /^Invalid template: HTML body, line 1, column 10: @content renders as nothing/,
    );
    const after = await delivered(apiKey, { template: 'older', to: 'a@example.org' });
    expect(after.status).toMatchObject({ status: 'sent', template_version: 4 });
  });

  it('takes back a part stored with @content in other line ends, and rolls back to a version that had it', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    // Put through the API from a checkout with CRLF line ends.
    const html = '<main>\r\n{{{@content}}}\r\n</main>';
    await createOfEarlierRelease(projectId, 'older', html);
    // A form sends every part back, with `\n` line ends: the part is still the one stored.
    const formHtml = html.replace(/\r\n/g, '\n');
    await templates.update(projectId, 'older', { subject: 'Hello', text: 'x', html: formHtml });
    await templates.update(projectId, 'older', { html: '<main>{{{content}}}</main>' });
    expect((await templates.get(projectId, 'older')).version).toBe(3);
    // What was saved once may be restored, though it would not be saved anew.
    await templates.rollback(projectId, 'older', 2);
    expect(await templates.get(projectId, 'older')).toMatchObject({ version: 4, html: formHtml });
    await templates.rollback(projectId, 'older', 1);
    expect(await templates.get(projectId, 'older')).toMatchObject({ version: 5, html });
  });

  it('restores a version that reads the same text with another engine as a new version', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates } = ctx.services;
    // Version 1 as a release before Handlebars left it: braces other than placeholders are text.
    await templates.create(projectId, { name: 'braces', subject: 'Hi', text: '{{#if a}}literal{{/if}}' });
    await asEarlierRelease(projectId, 'braces', { text_body: '{{#if a}}literal{{/if}}' }, 'placeholders');
    // The same parts saved again become Handlebars: the same text, read another way.
    await templates.update(projectId, 'braces', {
      subject: 'Hi',
      text: '{{#if a}}literal{{/if}}',
      html: null,
    });
    expect((await templates.versions(projectId, 'braces')).map((v) => [v.version, v.engine])).toEqual([
      [2, 'handlebars'],
      [1, 'placeholders'],
    ]);
    const { template, outcome } = await templates.rollback(projectId, 'braces', 1);
    expect(outcome).toBe('updated');
    expect(template.version).toBe(3);
    expect((await templates.versions(projectId, 'braces'))[0]).toMatchObject({
      version: 3,
      engine: 'placeholders',
    });
    // Restoring it again is the current content: nothing changes.
    expect(await templates.rollback(projectId, 'braces', 1)).toMatchObject({
      template: { version: 3 },
      outcome: 'unchanged',
    });
  });

  it('refuses a layout without its content placeholder, and deleting one that templates use', async () => {
    const { projectId } = await seedProject(ctx.services);
    const { templates, layouts } = ctx.services;
    expect(
      await refusal(() => layouts.create(projectId, { name: 'l', html: '<main>{{content}}</main>' })),
    ).toContain('{{{content}}}');
    expect(await refusal(() => layouts.create(projectId, { name: 'l', text: 'no place' }))).toContain(
      '{{content}}',
    );
    // Inside {{#each}}, {{#with}} or a section the name is the item's field: not the body's place.
    for (const html of [
      '<main>{{#each items}}{{{content}}}{{/each}}</main>',
      '<main>{{#with user}}{{{content}}}{{/with}}</main>',
      '<main>{{#user}}{{{content}}}{{/user}}</main>',
    ])
      expect(await refusal(() => layouts.create(projectId, { name: 'l', html }))).toContain(
        'outside {{#each}}, {{#with}} and sections',
      );
    // Inside {{#if}} it is still the body.
    await layouts.create(projectId, {
      name: 'either',
      html: '{{#if dark}}<div class="d">{{{content}}}</div>{{else}}<div>{{{content}}}</div>{{/if}}',
      text: '{{#unless plain}}>> {{/unless}}{{#if show}}{{content}}{{/if}}',
    });
    // A part stored before the rule stays as it was accepted while the other changes.
    await ctx.services.storage.db
      .updateTable('template_layouts')
      .set({ html_body: '<main>{{#each items}}{{{content}}}{{/each}}</main>' })
      .where('project_id', '=', projectId)
      .where('name', '=', 'either')
      .execute();
    await layouts.update(projectId, 'either', { text: '{{content}}' });
    await layouts.delete(projectId, 'either');
    await layouts.create(projectId, { name: 'l', text: '>> {{content}}' });
    await templates.create(projectId, { name: 'a', subject: 'A', text: 'a', layout: 'l' });
    await templates.create(projectId, { name: 'b', subject: 'B', text: 'b', layout: 'l' });
    expect(await refusal(() => layouts.delete(projectId, 'l'))).toBe(
      'Layout l is used by 2 templates (a, b); attach them elsewhere first',
    );
    for (const name of ['c', 'd', 'e', 'f'])
      await templates.create(projectId, { name, subject: name, text: name, layout: 'l' });
    expect(await refusal(() => layouts.delete(projectId, 'l'))).toBe(
      'Layout l is used by 6 templates (a, b, c, d, e, and 1 more); attach them elsewhere first',
    );
    for (const name of ['c', 'd', 'e', 'f']) await templates.delete(projectId, name);
    await templates.update(projectId, 'a', { layout: '' });
    await templates.delete(projectId, 'b');
    await layouts.delete(projectId, 'l');
    expect(await layouts.list(projectId)).toEqual([]);
  });

  it("fails a message whose render goes past the bound with 'Template render failed', and others still go", async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    await ctx.services.templates.create(projectId, {
      name: 'loop',
      subject: 'L',
      text: '{{#each items}}{{this}}{{/each}}',
    });
    const items = Array.from({ length: 100_000 }, () => 1);
    const { status } = await delivered(apiKey, { template: 'loop', to: 'c@example.org', data: { items } });
    expect(status).toMatchObject({ status: 'failed', attempts: 1 });
    expect(status.error_message).toMatch(/^Template render failed: more than 10000 blocks/);
    const next = await delivered(apiKey, { template: 'loop', to: 'c@example.org', data: { items: [1, 2] } });
    expect(next.status).toMatchObject({ status: 'sent' });
  });

  it("refuses a send whose locale is not a BCP 47 tag of at most 35 characters: 400 Invalid 'locale'", async () => {
    const { apiKey } = await seedProject(ctx.services);
    const anyTag = 'A BCP 47 tag of at most 35 characters, such as fr, fr-CA or zh-Hant-TW';
    for (const [locale, hint] of [
      ['fr_ca', 'BCP 47 tags are written with hyphens: fr-CA'],
      ['zh_Hant_TW', 'BCP 47 tags are written with hyphens: zh-Hant-TW'],
      [42, anyTag],
      ['', anyTag],
      ['a'.repeat(36), anyTag],
      ['en-', anyTag],
    ]) {
      const response = await send(apiKey, { template: 'user_created', to: 'd@example.org', locale });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: "Invalid 'locale'", hint });
    }
  });
});

/** A template whose HTML holds what Herald now refuses to save, as a database of an earlier release may. */
async function createOfEarlierRelease(projectId: number, name: string, html: string): Promise<void> {
  await ctx.services.templates.create(projectId, { name, subject: 'Hi', text: 'x', html: '<p>x</p>' });
  await asEarlierRelease(projectId, name, { html_body: html });
}

/**
 * Writes a template's first (and only) version as a database of an earlier release may hold it:
 * with `parts` and `engine`, which Herald may no longer save.
 */
async function asEarlierRelease(
  projectId: number,
  name: string,
  parts: { text_body?: string; html_body?: string },
  engine?: 'placeholders',
): Promise<void> {
  const db = ctx.services.storage.db;
  const { id } = await db
    .selectFrom('templates')
    .select('id')
    .where('project_id', '=', projectId)
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  const version = await db
    .selectFrom('template_versions')
    .select('id')
    .where('template_id', '=', id)
    .executeTakeFirstOrThrow();
  if (engine !== undefined)
    await db.updateTable('template_versions').set({ engine }).where('id', '=', version.id).execute();
  await db.updateTable('template_variants').set(parts).where('version_id', '=', version.id).execute();
  await db.updateTable('templates').set(parts).where('id', '=', id).execute();
}

describe('a template of many locale variants', () => {
  it('is checked one variant per turn of the event loop, and a PUT that loses the race to create it updates', async () => {
    const { projectId } = await seedProject(ctx.services);
    const variant = (n: number) => ({
      subject: `Hello {{name}} (${n})`,
      text: `{{#if name}}Hi {{name}}{{/if}} ${n}`,
      html: `<p>{{#each items}}{{this}}{{/each}} ${n}</p>`,
    });
    const locales = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`en-${100 + i}`, variant(i)]));
    // Counts the turns of the event loop while the save runs: a check of all forty variants in one
    // go would hold the process, and every project's sends, for all of them.
    let turns = 0;
    let saving = true;
    const tick = () => {
      if (!saving) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    try {
      const { outcome } = await ctx.services.templates.put(projectId, 'many_locales', {
        ...variant(-1),
        locales,
      });
      expect(outcome).toBe('created');
    } finally {
      saving = false;
    }
    expect(turns).toBeGreaterThanOrEqual(39);

    // Two PUTs creating one template, checked turn by turn side by side: one creates, the other
    // updates what it made, and neither is told the template exists.
    const [first, second] = await Promise.all([
      ctx.services.templates.put(projectId, 'raced', { ...variant(1), locales }),
      ctx.services.templates.put(projectId, 'raced', { ...variant(2), locales }),
    ]);
    expect([first.outcome, second.outcome].sort()).toEqual(['created', 'updated']);
    expect((await ctx.services.templates.get(projectId, 'raced')).version).toBe(2);
    const { outcome } = await ctx.services.templates.put(projectId, 'many_locales', {
      ...variant(-1),
      locales: { ...locales, 'en-100': variant(1000) },
    });
    expect(outcome).toBe('updated');
  });
});
