import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileTemplate, type RenderMode } from '../../src/domain/render.js';
import { placeholdersAsHandlebars } from '../../src/domain/template/from-placeholders.js';
import { compileHandlebars } from '../../src/domain/template/handlebars.js';

/**
 * A placeholder-engine template rewritten as Handlebars renders the same bytes, whatever its
 * braces, backslashes and names: sources are built from the pieces that trip Handlebars up.
 */

const PIECES = [
  '{{name}}',
  '{{ name }}',
  '{{{name}}}',
  '{{this}}',
  '{{0}}',
  '{{true}}',
  '{{null}}',
  '{{a.b}}',
  '{{a.this}}',
  '{{__proto__}}',
  '{{ 1 + 2 }}',
  '{{}}',
  '{{!x}}',
  '{{#if}}',
  '{{/if}}',
  '{{&name}}',
  '{{a/b}}',
  '{{@index}}',
  '{{..}}',
  '{{[name]}}',
  '{{> p}}',
  '{',
  '}',
  '{{',
  '}}',
  '\\',
  '\\\\',
  ' ',
  'x',
  '&<>"\'',
  '\r\n',
  '\n',
  '\t',
  '"',
];

const VALUES: Record<string, unknown> = {
  name: 'Jane <j> & "co"',
  this: 'Sir',
  0: '10 EUR',
  true: 'yes',
  null: 'nil',
  a: { b: 'B\r\nline', this: 'T' },
  '@index': 'at',
};

const MODES: RenderMode[] = ['text', 'html', 'subject'];

describe('placeholder templates rewritten as Handlebars', () => {
  it('render the same bytes in every mode', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...PIECES), { maxLength: 12 }), (parts) => {
        const source = parts.join('');
        const rewritten = placeholdersAsHandlebars(source);
        for (const mode of MODES) {
          const expected = compileTemplate(source, mode).render(VALUES);
          expect(
            compileHandlebars(rewritten, mode).render(VALUES),
            `${JSON.stringify(source)} → ${rewritten}`,
          ).toBe(expected);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('leave a template without braces as it was', () => {
    const css = '<style>p { color: red }</style><p>Hi {{name}}</p>';
    expect(placeholdersAsHandlebars(css)).toBe('<style>p { color: red }</style><p>Hi {{[name]}}</p>');
    expect(placeholdersAsHandlebars('Dear {{this}}, use \\{{name}} {{! no }} {{0}}')).toBe(
      'Dear {{[this]}}, use \\\\{{[name]}} {{"{{"}}! no }} {{[0]}}',
    );
  });
});
