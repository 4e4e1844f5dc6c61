import { parseSyntax } from './handlebars.js';
import { firstPath, placeOf } from './source-walk.js';
import { TemplateSyntaxError } from './syntax-error.js';

/**
 * Where a template's body goes into its layout: the layout's `content` placeholder, and the
 * `@content` of other services' layouts, which Herald refuses in a template because it would
 * render as nothing.
 */

/** Blocks that keep the data they are in: inside them `content` is still the template's body. */
const SAME_CONTEXT = new Set(['if', 'unless']);

/**
 * Whether a layout's part has its content placeholder: `{{{content}}}` in HTML (the body is
 * HTML already, so it is inserted raw), `{{content}}` or `{{{content}}}` in text. Only where the
 * data is the message's own: at the top, or inside `{{#if}}` and `{{#unless}}`; inside `{{#each}}`,
 * `{{#with}}` or a section the name is the item's field, and the caller's data would go out raw
 * in the body's place.
 */
export function hasContentPlaceholder(source: string, mode: 'text' | 'html'): boolean {
  const stack: hbs.AST.Program[] = [parseSyntax(source)];
  while (stack.length > 0) {
    for (const node of (stack.pop() as hbs.AST.Program).body) {
      if (node.type === 'MustacheStatement') {
        const mustache = node as hbs.AST.MustacheStatement;
        const path = mustache.path as hbs.AST.PathExpression;
        if (
          path.type === 'PathExpression' &&
          path.original === 'content' &&
          (mode === 'text' || !mustache.escaped)
        )
          return true;
      } else if (node.type === 'BlockStatement') {
        const block = node as hbs.AST.BlockStatement;
        const helper = block.path as hbs.AST.PathExpression;
        if (helper.type !== 'PathExpression' || !SAME_CONTEXT.has(helper.original)) continue;
        if (block.program) stack.push(block.program);
        if (block.inverse) stack.push(block.inverse);
      }
    }
  }
  return false;
}

/**
 * Refuses a template's part that reads `@content` in any case (`{{@content}}`, `{{{@Content}}}`,
 * `{{#if @content}}`), at the first place it does. Handlebars reads it as a data variable, which
 * nothing in Herald sets, so it would always render as nothing: it is where a layout of another
 * service (Postmark's) puts the template's body, and a Herald layout takes the body as `content`.
 * Checked where a template is saved, never where one renders, so templates saved before still send.
 */
export function refuseContentVariable(source: string): void {
  const found = firstPath(
    parseSyntax(source),
    (path) => path.data && path.parts[0]?.toLowerCase() === 'content',
  );
  if (found === null) return;
  throw new TemplateSyntaxError(
    `@${found.parts[0]} renders as nothing: Herald puts a template's body into its layout ` +
      'at {{{content}}} (HTML) or {{content}} (text), without the @',
    placeOf(found),
  );
}
