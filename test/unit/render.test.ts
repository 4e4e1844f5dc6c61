import { describe, it, expect } from 'vitest';
import { compileTemplate, escapeHtml, normalizeNewlines } from '../../src/domain/render.js';

const text = (source: string, values: Record<string, unknown>): string =>
  compileTemplate(source, 'text').render(values);
const html = (source: string, values: Record<string, unknown>): string =>
  compileTemplate(source, 'html').render(values);
const subject = (source: string, values: Record<string, unknown>): string =>
  compileTemplate(source, 'subject').render(values);

describe('compileTemplate: placeholders', () => {
  it('replaces a placeholder with and without spaces or tabs inside the braces', () => {
    expect(text('Hi {{name}}, {{ name }}, {{\tname\t}}, {{  name}}!', { name: 'Jane' })).toBe(
      'Hi Jane, Jane, Jane, Jane!',
    );
  });

  it('reads nested objects through dotted paths', () => {
    const values = { order: { id: 'A-17', customer: { name: 'Jane' } } };
    expect(text('{{order.id}} for {{ order.customer.name }}', values)).toBe('A-17 for Jane');
  });

  it('renders numbers, booleans and bigints as their text', () => {
    expect(text('{{a}} {{b}} {{c}} {{d}} {{e}}', { a: 42, b: 1.5, c: true, d: false, e: 10n })).toBe(
      '42 1.5 true false 10',
    );
    expect(text('{{zero}}', { zero: 0 })).toBe('0');
  });

  it('renders strings as they are', () => {
    expect(text('[{{s}}]', { s: '  <b>&"\'  ' })).toBe('[  <b>&"\'  ]');
  });

  it('renders null, undefined, objects, arrays, functions and symbols blank', () => {
    const values = {
      n: null,
      u: undefined,
      o: { a: 1 },
      arr: [1, 2],
      f: () => 'called',
      s: Symbol('x'),
    };
    expect(text('[{{n}}|{{u}}|{{o}}|{{arr}}|{{f}}|{{s}}]', values)).toBe('[|||||]');
  });

  it('renders a missing key blank, at any depth', () => {
    expect(text('[{{missing}}|{{a.missing}}|{{a.b.c.d}}|{{s.length}}]', { a: { b: 1 }, s: 'abc' })).toBe(
      '[|||]',
    );
  });

  it('keeps text that is not a placeholder as literal text', () => {
    const source = '{{ 1 + 2 }} {{}} {{ }} {{a b}} {{a..b}} {{.a}} {{a.}} {single} {{ a } }} }} {{';
    expect(text(source, { a: 'X', 'a b': 'Y' })).toBe(source);
  });

  it('lists placeholder paths in order of first appearance, deduplicated', () => {
    const template = compileTemplate(
      '{{ user_name }} {{order.id}} {{user_name}} {{{raw-x}}} {{ 1 + 2 }}',
      'html',
    );
    expect(template.placeholders).toEqual(['user_name', 'order.id', 'raw-x']);
    expect(compileTemplate('no placeholders', 'text').placeholders).toEqual([]);
  });

  it('renders a template many times with different values', () => {
    const template = compileTemplate('Hello {{name}}.', 'text');
    expect(template.render({ name: 'A' })).toBe('Hello A.');
    expect(template.render({ name: 'B' })).toBe('Hello B.');
    expect(template.render({})).toBe('Hello .');
  });
});

describe('compileTemplate: no prototype access', () => {
  it('renders inherited names blank', () => {
    const source = '[{{constructor}}|{{__proto__}}|{{toString}}|{{hasOwnProperty}}|{{a.constructor.name}}]';
    expect(text(source, { a: {} })).toBe('[||||]');
    expect(text('[{{length}}|{{arr.length}}]', { arr: [1, 2, 3] })).toBe('[|]');
  });

  it('renders own keys named like prototype members', () => {
    expect(text('{{constructor}}', JSON.parse('{"constructor": "own"}') as Record<string, unknown>)).toBe(
      'own',
    );
  });

  it('never reads through __proto__, even an own JSON key, and never pollutes Object.prototype', () => {
    const values = JSON.parse('{"__proto__": {"polluted": 1}, "a": {"__proto__": {"x": 2}}}') as Record<
      string,
      unknown
    >;
    expect(Object.hasOwn(values, '__proto__')).toBe(true);
    for (const mode of ['text', 'html', 'subject'] as const) {
      const source =
        '[{{__proto__.polluted}}|{{{__proto__.polluted}}}|{{polluted}}|{{a.__proto__.x}}|{{constructor}}]';
      expect(compileTemplate(source, mode).render(values)).toBe('[||||]');
    }
    expect(text('[{{__proto__.polluted}}]', {})).toBe('[]');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('does not read non-enumerable or accessor properties, and never runs a getter', () => {
    let calls = 0;
    const values: Record<string, unknown> = {};
    Object.defineProperty(values, 'hidden', { value: 'secret', enumerable: false });
    Object.defineProperty(values, 'getter', {
      get: () => {
        calls++;
        return 'computed';
      },
      enumerable: true,
    });
    expect(text('[{{hidden}}|{{getter}}]', values)).toBe('[|]');
    expect(calls).toBe(0);
  });

  it('renders blank for an object without a prototype when the key is missing', () => {
    const values = Object.create(null) as Record<string, unknown>;
    values.present = 'yes';
    expect(text('{{present}}{{missing}}', values)).toBe('yes');
  });
});

describe('compileTemplate: html mode', () => {
  it('escapes values and leaves the template markup alone', () => {
    expect(html('<p class="x">{{v}}</p>', { v: `<script>alert("x" & 'y')</script>` })).toBe(
      '<p class="x">&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;</p>',
    );
  });

  it('inserts the raw value for triple braces', () => {
    expect(html('<div>{{{ body }}}</div><p>{{body}}</p>', { body: '<b>&</b>' })).toBe(
      '<div><b>&</b></div><p>&lt;b&gt;&amp;&lt;/b&gt;</p>',
    );
  });

  it('treats mismatched braces as a literal brace next to a double placeholder', () => {
    expect(html('{{{v}} | {{v}}}', { v: '<' })).toBe('{&lt; | &lt;}');
  });

  it('normalizes CRLF and lone CR to LF in template and values', () => {
    expect(html('<p>\r\n{{v}}\r</p>', { v: 'a\r\nb\rc\n' })).toBe('<p>\na\nb\nc\n\n</p>');
  });
});

describe('compileTemplate: text mode', () => {
  it('treats triple braces like double braces and escapes nothing', () => {
    expect(text('{{{v}}} {{v}}', { v: '<b>&amp;</b>' })).toBe('<b>&amp;</b> <b>&amp;</b>');
  });

  it('normalizes CRLF and lone CR to LF in template and values', () => {
    expect(text('a\r\nb\rc\n{{v}}', { v: 'x\r\ny\rz' })).toBe('a\nb\nc\nx\ny\nz');
  });
});

describe('compileTemplate: subject mode', () => {
  it('replaces CR, LF and other line breaking controls with spaces', () => {
    expect(subject('Hello {{name}}', { name: 'Jane\r\nBcc: evil@x.example' })).toBe(
      'Hello Jane  Bcc: evil@x.example',
    );
    expect(subject('a{{v}}b', { v: '\t\u0000\u001f\u2028\u2029\u007f\u0085' })).toBe('a       b');
    expect(subject('Line one\r\nline two', {})).toBe('Line one  line two');
  });

  it('trims the final string, including around blank values', () => {
    expect(subject('  {{missing}} Order {{id}} {{missing}}\n', { id: 7 })).toBe('Order 7');
    expect(subject('{{v}}', { v: '\r\n  Hi  \n' })).toBe('Hi');
  });

  it('does not escape, and treats triple braces like double braces', () => {
    expect(subject('{{{v}}} & {{v}}', { v: '<Tom & "Jerry">' })).toBe('<Tom & "Jerry"> & <Tom & "Jerry">');
  });
});

describe('escapeHtml', () => {
  it('escapes the five significant characters', () => {
    expect(escapeHtml(`& < > " '`)).toBe('&amp; &lt; &gt; &quot; &#39;');
    expect(escapeHtml('&amp;')).toBe('&amp;amp;');
  });

  it('returns other text unchanged', () => {
    expect(escapeHtml('')).toBe('');
    expect(escapeHtml('plain text, ünïcödé 🎉')).toBe('plain text, ünïcödé 🎉');
    expect(escapeHtml('tail<')).toBe('tail&lt;');
  });
});

describe('normalizeNewlines', () => {
  it('turns CRLF and lone CR into LF', () => {
    expect(normalizeNewlines('a\r\nb\rc\nd\r\r\n')).toBe('a\nb\nc\nd\n\n');
    expect(normalizeNewlines('no breaks')).toBe('no breaks');
  });
});
