import { parseTemplate } from './handlebars.js';
import { TemplateSyntaxError } from './syntax-error.js';

/**
 * Liquid's tags in a Handlebars template: `{% if vip %}` is text to Handlebars, so a template
 * brought from a Liquid service would go out with its conditions and loops written as they are.
 */

const CONDITIONS = ['if', 'unless', 'elsif', 'else', 'endif', 'endunless', 'case', 'when', 'endcase'];
const LOOPS = ['for', 'endfor', 'tablerow', 'endtablerow', 'break', 'continue', 'cycle'];
const OTHERS = [
  'assign',
  'capture',
  'endcapture',
  'increment',
  'decrement',
  'raw',
  'endraw',
  'comment',
  'endcomment',
  'include',
  'render',
  'echo',
  'liquid',
];

const TAG_NAMES = [...CONDITIONS, ...LOOPS, ...OTHERS].join('|');

/** A Liquid tag; the text up to `%}` is bounded, so a part full of `{%` is read in linear time. */
const LIQUID_TAG = new RegExp(`\\{%-?\\s*(${TAG_NAMES})\\b[^%]{0,200}%\\}`);

/**
 * A Liquid tag cut off by a Handlebars tag where the text ends: `{% if {{vip}} %}` is the text
 * `{% if `, the value `vip`, then the text ` %}`.
 */
const LIQUID_TAG_CUT = new RegExp(`\\{%-?\\s*(${TAG_NAMES})\\b[^%]{0,200}$`);

/** What to write in Handlebars for a Liquid tag. */
function advice(tag: string): string {
  if (CONDITIONS.includes(tag)) return 'write {{#if value}}…{{else}}…{{/if}}';
  if (LOOPS.includes(tag)) return 'write {{#each list}}…{{/each}}';
  return 'send what it makes as a value';
}

/**
 * Refuses a part whose text holds a Liquid tag, at the first one; text only, so a tag inside a
 * `{{!-- comment --}}` is left alone. To show one in a message, its `{%` is written `{{"{%"}}`.
 * Checked where a part is saved, as `@content` is (layout-content.ts).
 */
export function refuseLiquidTags(source: string): void {
  const first = firstTag(parseTemplate(source).body);
  if (first === null) return;
  throw new TemplateSyntaxError(
    `a Liquid tag ({% ${first.tag} %}) would be sent as it is written: ${advice(first.tag)} (to show it as text, write its {% as {{"{%"}})`,
    first.place,
  );
}

/** A text's source as written (Handlebars' types call `original` a StripFlags; it is the source text). */
function sourceText(node: hbs.AST.Statement): string {
  return (node as unknown as { original: string }).original;
}

/**
 * Whether a tag cut off where a text ends is closed after the values that follow it: the next `%`
 * in the text after them begins `%}`, within the bound a whole tag has. `{% if {{pct}}` alone is
 * text, as `{% if pct` is.
 */
function closedLater(rest: readonly hbs.AST.Statement[]): boolean {
  let read = 0;
  for (const node of rest) {
    if (node.type !== 'ContentStatement') continue;
    const text = sourceText(node);
    const percent = text.indexOf('%');
    if (percent === -1) {
      read += text.length;
      if (read > 200) return false;
      continue;
    }
    return text[percent + 1] === '}' && read + percent <= 200;
  }
  return false;
}

/** The first Liquid tag in the text of `body` and the blocks in it, in the order of the source. */
function firstTag(
  body: readonly hbs.AST.Statement[],
): { tag: string; place: { line: number; column: number } } | null {
  for (const [index, node] of body.entries()) {
    if (node.type === 'BlockStatement') {
      const block = node as hbs.AST.BlockStatement;
      const found = firstTag(block.program?.body ?? []) ?? firstTag(block.inverse?.body ?? []);
      if (found !== null) return found;
      continue;
    }
    if (node.type !== 'ContentStatement') continue;
    const text = sourceText(node);
    // A tag cut off at the end of the text comes after any whole one in it (no `%` follows it).
    const found =
      LIQUID_TAG.exec(text) ?? (closedLater(body.slice(index + 1)) ? LIQUID_TAG_CUT.exec(text) : null);
    if (found === null) continue;
    // Lines end as Handlebars counts them for `loc`: at \r\n, \r or \n.
    const lines = text.slice(0, found.index).split(/\r\n?|\n/);
    const last = lines.at(-1) ?? '';
    const start = node.loc.start;
    const place =
      lines.length === 1
        ? { line: start.line, column: start.column + last.length + 1 }
        : { line: start.line + lines.length - 1, column: last.length + 1 };
    return { tag: found[1] as string, place };
  }
  return null;
}
