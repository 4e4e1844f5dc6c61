import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compileTemplate, type RenderMode } from '../../src/domain/render.js';
import { compileHandlebars } from '../../src/domain/template/handlebars.js';
import { TemplateSyntaxError } from '../../src/domain/template/syntax-error.js';

/**
 * Every template the test suite ever used (test/fixtures/templates/collect.ts gathers them from
 * the suite's whole history), rendered by the placeholder engine and by Handlebars in every mode
 * with awkward values: the bytes must be the same. The only templates allowed to differ are those
 * with braces that were never placeholders (`{{ 1 + 2 }}`): Handlebars refuses them with a place,
 * and the versions that hold them keep the placeholder engine.
 */
const TEMPLATES = JSON.parse(
  readFileSync(new URL('../fixtures/templates/suite-templates.json', import.meta.url), 'utf8'),
) as string[];

const PLACEHOLDER =
  /\{\{\{[ \t]*[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*[ \t]*\}\}\}|\{\{[ \t]*[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*[ \t]*\}\}/g;
/**
 * Only placeholders and text with no double brace, and no brace against a placeholder (`{{{v}}`
 * was `{` and a placeholder): what §3 documents.
 */
const documented = (source: string) => {
  const rest = source.replace(PLACEHOLDER, '§');
  return !/\{\{|\}\}|\{§|§\}/.test(rest);
};

const AWKWARD: unknown[] = [
  `O'Brien & <Sons> "quoted" \`tick\` a=b`,
  'line one\r\nline two\rthree\n',
  '\u2028sep\u0085\u0000\t',
  42,
  -1.5,
  0,
  true,
  false,
  null,
  '',
  { nested: 'object' },
  ['a', 'b'],
];

/** Values for each placeholder path, nested as the path says, each path given `value`. */
function valuesFor(paths: readonly string[], value: unknown): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const path of paths) {
    const keys = path.split('.');
    let node = root;
    keys.slice(0, -1).forEach((key) => {
      if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
      node = node[key] as Record<string, unknown>;
    });
    node[keys[keys.length - 1] as string] = value;
  }
  return root;
}

const MODES: RenderMode[] = ['text', 'html', 'subject'];

describe('the template language renders every template of the test suite as before', () => {
  it('has the suite’s templates to compare', () => {
    expect(TEMPLATES.length).toBeGreaterThan(40);
  });

  it('renders the same bytes for every documented template, in every mode, with awkward values', () => {
    let compared = 0;
    for (const source of TEMPLATES.filter(documented)) {
      for (const mode of MODES) {
        const before = compileTemplate(source, mode);
        const after = compileHandlebars(source, mode);
        expect(after.placeholders).toEqual(before.placeholders);
        const datasets = [
          {},
          JSON.parse('{"__proto__": {"polluted": "x"}, "a": {"__proto__": {"x": "y"}}}') as Record<
            string,
            unknown
          >,
          ...AWKWARD.map((value) => valuesFor(before.placeholders, value)),
        ];
        for (const values of datasets) {
          expect(after.render(values), `${JSON.stringify(source)} (${mode})`).toBe(before.render(values));
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(1000);
  });

  it('refuses, with a line and column, the templates whose braces were never placeholders', () => {
    const others = TEMPLATES.filter((source) => !documented(source));
    expect(others.length).toBeGreaterThan(0);
    for (const source of others) {
      let error: unknown = null;
      try {
        compileHandlebars(source, 'text');
      } catch (caught) {
        error = caught;
      }
      expect(error, JSON.stringify(source)).toBeInstanceOf(TemplateSyntaxError);
      expect((error as TemplateSyntaxError).place).not.toBeNull();
    }
  });

  it('escapes for HTML as before, and not as Handlebars does', () => {
    const value = { v: `<a href="x">'&'</a> \`=` };
    expect(compileHandlebars('{{v}}|{{{v}}}|{{& v}}', 'html').render(value)).toBe(
      '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt; `=|<a href="x">\'&\'</a> `=|<a href="x">\'&\'</a> `=',
    );
  });

  it('turns CR and LF in a subject into spaces, from values and from the template', () => {
    expect(
      compileHandlebars('Order {{id}}\r\n{{#if rush}}RUSH{{/if}}', 'subject').render({
        id: '1\r\nBcc: x',
        rush: true,
      }),
    ).toBe('Order 1  Bcc: x  RUSH');
  });
});
