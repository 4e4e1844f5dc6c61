import { parseTemplate } from './handlebars.js';
import { firstInText, firstPath, placeOf } from './source-walk.js';
import { TemplateSyntaxError } from './syntax-error.js';

/**
 * Placeholders of other services that Handlebars reads without a word and that would reach the
 * recipient wrong: Mailchimp's merge tags (`*|FNAME|*`) are text to it, sent as they are written;
 * Postmark's own values (`{{{ pm:unsubscribe }}}`) are names nothing in Herald sets, rendered as
 * nothing. Refused where a part is saved, as Liquid's tags are (liquid-tags.ts).
 */

/** A merge tag; what it holds is bounded, so a part full of `*|` is read in linear time. */
const MERGE_TAG = /\*\|([A-Za-z][\w:\- /.,]{0,100}?)\|\*/;

/** Mailchimp's conditional merge tags (`*|IF:VIP|*`, `*|ELSEIF:…|*`, `*|ELSE:|*`, `*|END:IF|*`). */
const CONDITION = /^(?:IF|IFNOT|ELSEIF|ELSE|END):(\w*)/i;

/** What to write in Handlebars for a merge tag. */
function advice(tag: string): string {
  const condition = CONDITION.exec(tag);
  if (condition !== null) {
    const value = condition[1] === '' || /^IF$/i.test(condition[1] ?? '') ? 'value' : condition[1];
    return `write {{#if ${value}}}…{{else}}…{{/if}}`;
  }
  if (/^\w+$/.test(tag)) return `write {{${tag}}} and send its value`;
  return 'send what it makes as a value';
}

/**
 * Refuses a part holding a Mailchimp merge tag in its text, or reading one of Postmark's `pm:`
 * values, at the first place it does. To show a merge tag in a message, its `*|` is written
 * `{{"*|"}}`.
 */
export function refuseOtherServicesTags(source: string): void {
  const program = parseTemplate(source);
  const merge = firstInText(program.body, (text) => MERGE_TAG.exec(text));
  const postmark = firstPath(program, (path) => !path.data && /^pm:/i.test(path.parts[0] ?? ''));
  const postmarkPlace = postmark === null ? null : placeOf(postmark);
  if (merge !== null && (postmarkPlace === null || before(merge.place, postmarkPlace))) {
    const tag = merge.found[1] as string;
    throw new TemplateSyntaxError(
      `a Mailchimp merge tag (*|${tag}|*) would be sent as it is written: ${advice(tag)} ` +
        '(to show it as text, write its *| as {{"*|"}})',
      merge.place,
    );
  }
  if (postmark !== null)
    throw new TemplateSyntaxError(
      `${postmark.original} is Postmark's and renders as nothing: Herald sets no value of its own; ` +
        'send it as a value of yours (an unsubscribe link as {{{unsubscribe_url}}}, say)',
      postmarkPlace,
    );
}

function before(a: { line: number; column: number }, b: { line: number; column: number }): boolean {
  return a.line < b.line || (a.line === b.line && a.column < b.column);
}
