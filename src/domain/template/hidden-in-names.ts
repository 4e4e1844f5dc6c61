import { parseSyntax } from './handlebars.js';
import { firstPath, placeOf } from './source-walk.js';
import { TemplateSyntaxError } from './syntax-error.js';

/**
 * Characters that are not seen where a template is read: zero-width spaces and joiners, the soft
 * hyphen, direction marks (Unicode's format characters). Pasted from a document into a
 * placeholder, `{{name}}` reads as `name` and is another name, which no value's key matches: it
 * renders blank without a word (notification-api.md), so it is refused where a part is saved.
 * (No-break spaces and the byte order mark are spaces to Handlebars, never part of a name.)
 */
const HIDDEN = /\p{Cf}/u;

/** Refuses a part that reads a name holding a character no one sees, at the first place it does. */
export function refuseHiddenInNames(source: string): void {
  const found = firstPath(parseSyntax(source), (path) => HIDDEN.test(path.original));
  if (found === null) return;
  const hidden = HIDDEN.exec(found.original)?.[0] ?? '';
  const code = `U+${(hidden.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
  const shown = found.original.replace(new RegExp(HIDDEN.source, 'gu'), '');
  throw new TemplateSyntaxError(
    `the name ${shown} holds a character that cannot be seen (${code}), so no value's key matches it ` +
      `and it renders blank: type the name again`,
    placeOf(found),
  );
}
