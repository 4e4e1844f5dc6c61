import { parseSyntax } from './handlebars.js';
import { firstInText, firstPath, placeOf } from './source-walk.js';
import { comesBefore, TemplateSyntaxError } from './syntax-error.js';

/**
 * Placeholders of other services that Handlebars reads without a word and that would reach the
 * recipient wrong: Mailchimp's merge tags (`*|FNAME|*`) are text to it, sent as they are written;
 * Postmark's own values (`{{{ pm:unsubscribe }}}`) are names nothing in Herald sets, rendered as
 * nothing. Refused where a part is saved, as Liquid's tags are (liquid-tags.ts).
 */

/**
 * A merge tag: an upper-case name, then for some (`*|IF:VIP=Gold|*`, `*|FEEDBLOCK:https://…|*`) a
 * colon and an argument; Mailchimp writes them in capitals, which keeps Markdown's `|*Item*|Price|*`
 * and `a*|b|*` text. Spaces around the name may be no-break spaces, as editors write them. A tag
 * is on one line; what it holds is bounded, so a part full of `*|` is read in linear time.
 */
const MERGE_TAG = /\*\|[ \t\u00a0]{0,8}([A-Z][A-Z0-9_]{0,60}(?::[^|*\r\n]{0,200})?)[ \t\u00a0]{0,8}\|\*/;

/** Mailchimp's conditional merge tags: `*|IF:VIP|*`, `*|IFNOT:…|*`, `*|ELSEIF:…|*`, `*|ELSE:|*`, `*|END:IF|*`. */
const CONDITION = /^(IF|IFNOT|ELSEIF|ELSE|END):\s*([A-Za-z_]\w*)?\s*(.*)$/;

/** What to write in Handlebars for a merge tag. */
function advice(tag: string): string {
  const condition = CONDITION.exec(tag);
  if (condition === null)
    return /^\w+$/.test(tag) ? `write {{${tag}}} and send its value` : 'send what it makes as a value';
  const [, kind, name, comparison] = condition;
  if (kind !== 'ELSE' && kind !== 'END' && (name === undefined || (comparison ?? '').trim() !== ''))
    // Handlebars compares nothing: what the tag tests is sent as a value of its own.
    return `send whether ${tag.slice(tag.indexOf(':') + 1).trim() || 'it'} holds as a value of its own (true or false) and test that with {{#if}}`;
  const value = name ?? '';
  switch (kind) {
    case 'IF':
      return `write {{#if ${value}}}…{{else}}…{{/if}}`;
    case 'IFNOT':
      return `write {{#unless ${value}}}…{{/unless}}`;
    case 'ELSEIF':
      return `write {{else if ${value}}}`;
    case 'ELSE':
      return 'write {{else}}';
    default:
      return 'write {{/if}} (or {{/unless}})';
  }
}

/**
 * Refuses a part holding a Mailchimp merge tag in its text, or reading one of Postmark's `pm:`
 * values, at the first place it does. To show a merge tag in a message, its `*|` is written
 * `{{"*|"}}`.
 */
export function refuseOtherServicesTags(source: string): void {
  const program = parseSyntax(source);
  const merge = firstInText(program.body, (text) => MERGE_TAG.exec(text));
  const postmark = firstPath(program, (path) => !path.data && /^pm:/i.test(path.parts[0] ?? ''));
  const postmarkPlace = postmark === null ? null : placeOf(postmark);
  if (merge !== null && (postmarkPlace === null || comesBefore(merge.place, postmarkPlace))) {
    throw new TemplateSyntaxError(
      `a Mailchimp merge tag (${merge.found[0]}) would be sent as it is written: ${advice(merge.found[1] as string)} ` +
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
