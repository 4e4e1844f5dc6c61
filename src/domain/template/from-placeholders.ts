import { placeholderPieces } from '../render.js';

/**
 * A placeholder-engine source rewritten as Handlebars that renders the same bytes. A template
 * saved before Herald spoke Handlebars is rewritten so when it is next changed: the parts left as
 * they were keep their output, and the new version is Handlebars like every other.
 *
 * Placeholders become paths of escaped segments (`{{ a.this }}` → `{{[a].[this]}}`), so names
 * Handlebars gives a meaning (`this`, `true`, `0`, `@index`) stay plain keys. Literal text stays
 * as it is, except what Handlebars would read as part of a mustache, which is written as a string
 * value instead: a run of `{{`, a `{` just before a mustache, a run of `}` just after one. A run
 * of backslashes just before a mustache gets one more, since Handlebars takes one away.
 */
export function placeholdersAsHandlebars(source: string): string {
  const pieces = placeholderPieces(source);
  let out = '';
  let afterMustache = false;
  pieces.forEach((piece, index) => {
    if (typeof piece !== 'string') {
      const path = piece.path
        .split('.')
        .map((segment) => `[${segment}]`)
        .join('.');
      out += piece.raw ? `{{{${path}}}}` : `{{${path}}}`;
      afterMustache = true;
      return;
    }
    const beforeMustache = index < pieces.length - 1;
    out += literal(piece, afterMustache, beforeMustache);
    afterMustache = false;
  });
  return out;
}

/** Literal text between mustaches, with what Handlebars would misread written as strings. */
function literal(text: string, afterMustache: boolean, beforeMustache: boolean): string {
  let out = '';
  let i = 0;
  if (afterMustache) {
    const closing = /^\}+/.exec(text)?.[0] ?? '';
    if (closing !== '') out += stringValue(closing);
    i = closing.length;
  }
  while (i < text.length) {
    const opening = /^\{+/.exec(text.slice(i))?.[0] ?? '';
    const atEnd = i + opening.length === text.length;
    if (opening.length >= 2 || (opening.length === 1 && atEnd && beforeMustache)) {
      out = escapeBackslashes(out) + stringValue(opening);
      i += opening.length;
      // Handlebars reads a `}` right after a mustache's close as part of it.
      const closing = /^\}+/.exec(text.slice(i))?.[0] ?? '';
      if (closing !== '') out += stringValue(closing);
      i += closing.length;
      continue;
    }
    out += text[i];
    i += 1;
  }
  return beforeMustache ? escapeBackslashes(out) : out;
}

/** A run of braces as a mustache Handlebars writes as it is. */
function stringValue(braces: string): string {
  return `{{"${braces}"}}`;
}

/** Text followed by a mustache: a trailing run of backslashes gets one more. */
function escapeBackslashes(text: string): string {
  return text.endsWith('\\') ? `${text}\\` : text;
}
