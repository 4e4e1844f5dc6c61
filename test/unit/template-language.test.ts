import { describe, expect, it } from 'vitest';
import { CompiledMessage, templatePlaceholders } from '../../src/domain/message.js';
import { RENDER_LIMITS, TemplateRenderError } from '../../src/domain/template/budget.js';
import { compileTemplate } from '../../src/domain/render.js';
import { compileHandlebars } from '../../src/domain/template/handlebars.js';
import { canonicalLocale, chooseLocale } from '../../src/domain/template/locale.js';
import { LocalizedTemplate } from '../../src/domain/template/localized.js';
import { TemplateSyntaxError } from '../../src/domain/template/syntax-error.js';

const text = (source: string, values: Record<string, unknown>) =>
  compileHandlebars(source, 'text').render(values);
const html = (source: string, values: Record<string, unknown>) =>
  compileHandlebars(source, 'html').render(values);

function syntaxError(source: string): TemplateSyntaxError {
  try {
    compileHandlebars(source, 'html');
  } catch (error) {
    if (error instanceof TemplateSyntaxError) return error;
    throw error;
  }
  throw new Error(`${JSON.stringify(source)} compiled`);
}

function renderError(run: () => unknown): TemplateRenderError {
  try {
    run();
  } catch (error) {
    if (error instanceof TemplateRenderError) return error;
    throw error;
  }
  throw new Error('rendered');
}

describe('the template language: what SES and SendGrid templates use', () => {
  it('renders the lines of an order with #each, this, @index, @first and @last', () => {
    const source = '{{#each lines}}{{@index}}. {{name}} × {{qty}}{{#if @last}}.{{else}}, {{/if}}{{/each}}';
    expect(
      text(source, {
        lines: [
          { name: 'Tea', qty: 2 },
          { name: 'Cup', qty: 1 },
        ],
      }),
    ).toBe('0. Tea × 2, 1. Cup × 1.');
  });

  it('drops the lines a block tag stands on alone, as Handlebars does', () => {
    const source = 'Items:\n{{#each items}}\n- {{this}}\n{{/each}}\nThanks\n';
    expect(text(source, { items: ['a', 'b'] })).toBe('Items:\n- a\n- b\nThanks\n');
  });

  it('iterates an object with @key, and renders the else of an empty list', () => {
    expect(text('{{#each totals}}{{@key}}={{this}};{{/each}}', { totals: { net: 10, tax: 2 } })).toBe(
      'net=10;tax=2;',
    );
    expect(text('{{#each items}}x{{else}}no items{{/each}}', { items: [] })).toBe('no items');
  });

  it('takes #if, #else and #unless as Handlebars does: empty lists and 0 are false', () => {
    const source =
      '{{#if trial}}Trial ends {{trial_end}}{{else}}Paid{{/if}}/{{#unless items}}empty{{/unless}}';
    expect(text(source, { trial: true, trial_end: 'Friday', items: [] })).toBe('Trial ends Friday/empty');
    expect(text(source, { trial: 0, items: [1] })).toBe('Paid/');
  });

  it('reads through #with, ../ and @root, and sections in Mustache style', () => {
    expect(
      text('{{#with user}}{{first}} of {{../company}} {{@root.company}}{{/with}}', {
        user: { first: 'Jo' },
        company: 'Acme',
      }),
    ).toBe('Jo of Acme Acme');
    expect(
      text('{{#items}}[{{name}}]{{/items}}{{^none}}no none{{/none}}', {
        items: [{ name: 'a' }, { name: 'b' }],
      }),
    ).toBe('[a][b]no none');
  });

  it('drops comments and writes escaped braces literally', () => {
    expect(text('a{{!-- a {{note}} --}}b{{! short }}c \\{{literal}}', {})).toBe('abc {{literal}}');
  });

  it('escapes values inside blocks of the HTML body, and {{{raw}}} inserts them raw', () => {
    expect(html('{{#each xs}}<b>{{this}}</b>{{{this}}}{{/each}}', { xs: ['<i>'] })).toBe(
      '<b>&lt;i&gt;</b><i>',
    );
  });

  it('never reaches a prototype, through paths or blocks', () => {
    const values = JSON.parse('{"__proto__": {"p": "x"}, "s": "abc", "list": [1, 2]}') as Record<
      string,
      unknown
    >;
    const source =
      '[{{constructor.constructor}}|{{s.length}}|{{list.length}}|{{#with __proto__}}{{p}}{{/with}}|{{#each constructor}}x{{/each}}|{{#each __proto__}}{{this}}{{/each}}|{{list.[1]}}]';
    expect(text(source, values)).toBe('[||||||2]');
    expect(({} as Record<string, unknown>).p).toBeUndefined();
  });
});

describe('the template language: what it refuses when saved, with the place', () => {
  it.each([
    ['Hello\n{{#if trial}}\nno end', 2, '{{#if}} is not closed (its {{/if}} is missing)'],
    ['{{#if a}}x{{/each}}', 1, "doesn't match"],
    ['ok\nSum {{ 1 + 2 }}', 2, 'unexpected character'],
    ['a {{}}', 1, 'nothing to write'],
    ['{{> footer}}', 1, 'partials'],
    ['x {{formatDate date}}', 1, "unknown helper 'formatDate'"],
    ['{{#equals a "b"}}y{{/equals}}', 1, "unknown helper 'equals'"],
    ['{{#if (gt a 1)}}y{{/if}}', 1, 'parentheses'],
    ['{{lookup a "b"}}', 1, "unknown helper 'lookup'"],
    ['{{log "x"}}', 1, "unknown helper 'log'"],
    ['{{#if}}y{{/if}}', 1, 'exactly one value'],
    ['{{#lookup}}x{{/lookup}}', 1, "'lookup' is a name Handlebars keeps"],
    ['{{#if a}}\n{{#log}}x{{/log}}{{/if}}', 2, "'log' is a name Handlebars keeps"],
    ['Hi\n{{ name | upcase }}', 2, 'a filter ({{ value | filter }}, as in Liquid) is not supported'],
  ])('%j', (source, line, reason) => {
    const error = syntaxError(source);
    expect(error.place?.line).toBe(line);
    expect(error.place?.column).toBeGreaterThan(0);
    expect(error.message).toContain(reason);
  });

  it('names a block left open at its opening tag, the innermost one the part ends in', () => {
    const each = syntaxError('<ul>\n  {{#each items}}\n  <li>{{#if a}}x{{/if}}</li>\n</ul>');
    expect(each.message).toBe('line 2, column 3: {{#each}} is not closed (its {{/each}} is missing)');
    expect(each.place).toEqual({ line: 2, column: 3 });
    const section = syntaxError('{{#each x}}{{#with y}}{{/with}}\n{{~^none}}');
    expect(section.message).toBe('line 2, column 1: {{^none}} is not closed (its {{/none}} is missing)');
    expect(section.place).toEqual({ line: 2, column: 1 });
    // A block is named by its whole path.
    for (const path of ['order.items', '../list', '@root.list', '[odd name]']) {
      const block = syntaxError(`{{#if a}}{{/if}}{{#${path}}}x`);
      expect(block.message).toBe(
        `line 1, column 17: {{#${path}}} is not closed (its {{/${path}}} is missing)`,
      );
    }
    // An else, in any of its forms, closes nothing and opens nothing.
    const chain = syntaxError('{{#if a}}{{else if b}}{{^}}c');
    expect(chain.message).toBe('line 1, column 1: {{#if}} is not closed (its {{/if}} is missing)');
    expect(chain.place).toEqual({ line: 1, column: 1 });
  });

  it('names the first unsupported thing in the order of the source, and every unknown helper at once', () => {
    const helpers = syntaxError(
      '{{#if a}}{{insert b}}{{else}}{{formatDate d "y"}}{{/if}}\n{{#equals p "x"}}{{t q}}{{/equals}}',
    );
    expect(helpers.message).toBe(
      "line 1, column 10: unknown helper 'insert' (Herald has #if, #unless, #each and #with); " +
        "also 'formatDate' at line 1, column 30, 'equals' at line 2, column 1, 't' at line 2, column 18",
    );
    // A partial before the first helper is named first; one after it, once the helpers are mended.
    expect(syntaxError('{{> header}}\n{{insert b}}').message).toBe(
      'line 1, column 1: partials ({{> name}}) are not supported; use a layout',
    );
    expect(syntaxError('{{insert b}}\n{{> footer}}{{t q}}').message).toBe(
      "line 1, column 1: unknown helper 'insert' (Herald has #if, #unless, #each and #with)",
    );
    const many = syntaxError(Array.from({ length: 13 }, (_, i) => `{{h${i} x}}`).join('\n'));
    expect(many.message).toMatch(
      /; also 'h1' at line 2, column 1, .*'h10' at line 11, column 1, and 2 more$/,
    );
  });

  it('gives the column of the first wrong character', () => {
    expect(syntaxError('ok\nSum {{ 1 + 2 }}').place).toEqual({ line: 2, column: 10 });
  });
});

describe('the template language: a render is bounded', () => {
  it('fails an #each over 100,000 items instead of rendering it', () => {
    const template = compileHandlebars('{{#each items}}{{this}},{{/each}}', 'text');
    const error = renderError(() => template.render({ items: Array.from({ length: 100_000 }, (_, i) => i) }));
    expect(error.message).toMatch(/^Template render failed: more than 10000 blocks/);
    // An order of a thousand lines renders.
    expect(template.render({ items: Array.from({ length: 1000 }, () => 1) })).toHaveLength(2000);
  });

  it('fails nested loops that multiply, however few items each has', () => {
    const source =
      '{{#each a}}{{#each @root.a}}{{#each @root.a}}{{#each @root.a}}.{{/each}}{{/each}}{{/each}}{{/each}}';
    expect(renderError(() => text(source, { a: Array(12).fill(0) })).message).toContain('blocks');
  });

  it('fails many placeholders inside a loop within the blocks bound', () => {
    // 200 items are 200 block bodies, far below the blocks bound, and 198,000 placeholders.
    const items = Array(200).fill({ a: { b: '' } });
    const values = `{{#each items}}${'{{a.b}}'.repeat(990)}{{/each}}`;
    expect(renderError(() => text(values, { items })).message).toBe(
      `Template render failed: more than ${RENDER_LIMITS.values} placeholders written (many placeholders in an #each over many items?)`,
    );
    // An #if never taken renders its (empty) else: a block, counted by the blocks bound.
    const conditions = `{{#each items}}${'{{#if no}}x{{/if}}'.repeat(490)}{{/each}}`;
    expect(renderError(() => text(conditions, { items })).message).toContain('blocks');
    // An order of a thousand lines with twenty placeholders each renders.
    const lines = `{{#each items}}${'{{v}}'.repeat(20)}{{/each}}`;
    expect(text(lines, { items: Array(1000).fill({ v: 'x' }) })).toHaveLength(20_000);
  });

  it('fails long paths read many times, within the bounds on blocks and placeholders', () => {
    // 200 items, 20,000 placeholders, each a path of 31 steps through data 30 deep.
    let deep: unknown = 'x';
    for (let i = 0; i < 30; i++) deep = { a: deep };
    const path = `@root.d${'.a'.repeat(30)}`;
    const source = `{{#each items}}${`{{${path}}}`.repeat(100)}{{/each}}`;
    expect(renderError(() => text(source, { d: deep, items: Array(200).fill(0) })).message).toBe(
      `Template render failed: more than ${RENDER_LIMITS.lookups} steps through the data (long paths, or many placeholders in an #each over many items?)`,
    );
    // Half as many items stay within it.
    expect(text(source, { d: deep, items: Array(100).fill(0) })).toHaveLength(10_000);
  });

  it('counts the steps of the placeholder engine too, whose templates a rollback may bring back', () => {
    const path = `d${'.a'.repeat(31)}`;
    const template = compileTemplate(`{{${path}}} `.repeat(20_000), 'text');
    expect(renderError(() => template.render({})).message).toContain('steps through the data');
  });

  it('counts a value as it is written, escaped', () => {
    // Each " is written &quot;: six characters for one.
    const quotes = '"'.repeat(RENDER_LIMITS.output / 4);
    expect(renderError(() => html('<p>{{v}}</p>', { v: quotes })).message).toContain('output larger');
    expect(html('<p>{{{v}}}</p>', { v: quotes })).toHaveLength(quotes.length + 7);
  });

  it('fails output past the bound, from values or from repeated text', () => {
    const big = 'x'.repeat(RENDER_LIMITS.output / 2 + 1);
    expect(renderError(() => text('{{v}}{{v}}', { v: big })).message).toBe(
      `Template render failed: output larger than ${RENDER_LIMITS.output} characters`,
    );
    const block = `{{#each items}}${'y'.repeat(100_000)}{{/each}}`;
    expect(renderError(() => text(block, { items: Array(30).fill(0) })).message).toContain('output larger');
  });

  it('counts one budget for all the parts of a message, its layout included', () => {
    const half = 'z'.repeat(RENDER_LIMITS.output / 2 + 1);
    const parts = new CompiledMessage({ subject: 'S', text: '{{v}}', html: '<p>{{v}}</p>' }, null);
    expect(renderError(() => parts.render({ v: half })).message).toContain('output larger');
    // A third in the body and two more in its layout.
    const third = 'z'.repeat(RENDER_LIMITS.output / 3 + 1);
    const message = new CompiledMessage(
      { subject: 'S', text: '{{v}}', html: '<p>{{v}}</p>' },
      { text: '{{content}}{{v}}{{v}}', html: '<main>{{{content}}}</main>' },
    );
    expect(renderError(() => message.render({ v: third })).message).toContain('output larger');
    expect(message.render({ v: 'ok' })).toEqual({
      subject: 'S',
      text: 'okokok',
      html: '<main><p>ok</p></main>',
    });
  });

  it('fails a subject that renders past its bound, whatever the rest of the message', () => {
    const message = new CompiledMessage({ subject: 'Re: {{v}}', text: 'ok', html: null }, null);
    const long = 'v'.repeat(RENDER_LIMITS.subject - 4);
    expect(message.render({ v: long }).subject).toHaveLength(RENDER_LIMITS.subject);
    expect(renderError(() => message.render({ v: `${long}w` })).message).toBe(
      `Template render failed: the subject is ${RENDER_LIMITS.subject + 1} characters, more than ${RENDER_LIMITS.subject} (a long value in it belongs in the body)`,
    );
  });

  it('counts a body once though its layout writes it again', () => {
    const body = 'b'.repeat(Math.floor(RENDER_LIMITS.output * 0.6));
    const message = new CompiledMessage(
      { subject: 'S', text: '{{v}}', html: null },
      { text: '[{{content}}]', html: null },
    );
    expect(message.render({ v: body }).text).toHaveLength(body.length + 2);
  });
});

describe('locale variants', () => {
  it('keeps well-formed BCP 47 tags in canonical case and refuses the rest', () => {
    expect(canonicalLocale('fr-ca')).toBe('fr-CA');
    expect(canonicalLocale('zh-hant-tw')).toBe('zh-Hant-TW');
    for (const bad of ['', 'fr_CA', 'x', 'en-', 'a'.repeat(36), 7, null, 'fr CA'])
      expect(canonicalLocale(bad)).toBeNull();
  });

  it('takes the exact tag, else the language, else the default', () => {
    const locales = ['fr', 'fr-CA', 'de-AT'];
    expect(chooseLocale(locales, 'FR-ca')).toBe('fr-CA');
    expect(chooseLocale(locales, 'fr-BE')).toBe('fr');
    expect(chooseLocale(locales, 'de-DE')).toBeNull();
    expect(chooseLocale(locales, null)).toBeNull();
  });

  it('says which variant and version rendered', () => {
    const template = new LocalizedTemplate(
      new Map([
        ['', { subject: 'Hello {{n}}', text: 'Hi', html: null }],
        ['fr', { subject: 'Bonjour {{n}}', text: 'Salut', html: null }],
      ]),
      null,
      7,
    );
    expect(template.render({ n: 'Jo' }, 'fr-CA')).toMatchObject({
      subject: 'Bonjour Jo',
      templateLocale: 'fr',
      templateVersion: 7,
    });
    expect(template.render({ n: 'Jo' }, 'es')).toMatchObject({
      subject: 'Hello Jo',
      templateLocale: null,
      templateVersion: 7,
    });
  });
});

describe('the template language: a message of its rendered parts', () => {
  it('goes as text when its HTML body renders as nothing but white space, in a layout or not', () => {
    const source = { subject: 'S', text: 'Hi {{name}}', html: '{{#if promo}}<p>{{promo}}</p>{{/if}}\n  ' };
    const layout = { text: '{{content}}\n-- Shop', html: '<main>{{{content}}}</main>' };
    for (const message of [new CompiledMessage(source), new CompiledMessage(source, layout)]) {
      expect(message.render({ name: 'Jane' }).html).toBeNull();
      expect(message.render({ name: 'Jane', promo: 'Sale' }).html).toMatch(/<p>Sale<\/p>/);
    }
    expect(new CompiledMessage(source, layout).render({ name: 'Jane' })).toEqual({
      subject: 'S',
      text: 'Hi Jane\n-- Shop',
      html: null,
    });
  });
});

describe("the template language: a template's placeholders without compiling it", () => {
  it('are those the compiled template lists, layout and engine alike', () => {
    const layout = {
      text: '{{content}}\n-- {{company}}',
      html: '<main>{{{content}}}</main>{{#if footer}}{{footer}}{{/if}}',
    };
    const sources = [
      { subject: 'Hi {{user.name}}', text: '{{#each items}}{{name}} {{../currency}}{{/each}}', html: null },
      {
        subject: '{{#if vip}}VIP {{/if}}{{order.id}}',
        text: '{{#with user}}{{first}} {{@root.company}}{{/with}} {{#list}}x{{/list}} {{^empty}}none{{/empty}}',
        html: '<p>{{{raw}}} {{content}}</p>',
      },
      {
        subject: 'Old {{name}}',
        text: '{{ name }} {{#if}}',
        html: '<b>{{name}}</b>',
        engine: 'placeholders' as const,
      },
    ];
    for (const source of sources)
      for (const frame of [null, layout]) {
        const compiled = new CompiledMessage(source, frame).placeholders;
        expect(compiled.length).toBeGreaterThan(0);
        expect(templatePlaceholders(source, frame)).toEqual(compiled);
      }
  });

  it('are refused as compiling would, with the place', () => {
    expect(() => templatePlaceholders({ subject: 's', text: 'Hi {{#if a}}', html: null })).toThrow(
      TemplateSyntaxError,
    );
  });
});
