import { parseSyntax } from './handlebars.js';
import { firstInText, sourceText } from './source-walk.js';
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
  // A tag cut off at the end of a text comes after any whole one in it (no `%` follows it).
  const first = firstInText(
    parseSyntax(source).body,
    (text, rest) => LIQUID_TAG.exec(text) ?? (closedLater(rest) ? LIQUID_TAG_CUT.exec(text) : null),
  );
  if (first === null) return;
  const tag = first.found[1] as string;
  throw new TemplateSyntaxError(
    `a Liquid tag ({% ${tag} %}) would be sent as it is written: ${advice(tag)} (to show it as text, write its {% as {{"{%"}})`,
    first.place,
  );
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
