import { TemplateSyntaxError } from './syntax-error.js';
import { walkInOrder } from './source-walk.js';

/**
 * What Herald accepts of Handlebars' syntax (see handlebars.ts): the four block helpers and
 * sections, plain values; no partials, decorators, sub-expressions or other helpers. Each refusal
 * says where, in words a template's author reads.
 */

/** The block helpers a template may use; anything else is refused when the template is saved. */
export const BLOCK_HELPERS = ['if', 'unless', 'each', 'with'] as const;

type Node = hbs.AST.Node;
type Expression = hbs.AST.Expression;

/** A block's opening tag: `#each` or `^items`, and where it is. */
export interface OpenBlock {
  readonly tag: string;
  readonly line: number;
  readonly column: number;
}

/**
 * A parse error in words a template's author reads, at `lexerAt` when the error does not say where.
 * A block left open is named, at its opening tag, by `openBlock` (the innermost one the part ends in).
 */
export function syntaxError(
  error: unknown,
  lexerAt: { line: number; column: number } | null,
  openBlock: () => OpenBlock | null = () => null,
): TemplateSyntaxError {
  if (error instanceof RangeError) return new TemplateSyntaxError('blocks nested too deeply', null);
  const message = error instanceof Error ? error.message : String(error);
  const open = endsInBlock(message) ? openBlock() : null;
  if (open !== null) {
    const name = open.tag.slice(1);
    return new TemplateSyntaxError(`{{${open.tag}}} is not closed (its {{/${name}}} is missing)`, {
      line: open.line,
      column: open.column,
    });
  }
  const exception = error as { lineNumber?: number; column?: number };
  if (typeof exception.lineNumber === 'number' && typeof exception.column === 'number') {
    // Handlebars' own exceptions end with " - line:column" (column from 0).
    return new TemplateSyntaxError(message.replace(/ - \d+:\d+$/, ''), {
      line: exception.lineNumber,
      column: exception.column + 1,
    });
  }
  // The parser's message shows the place with a caret; the lexer knows the token it stopped at.
  return new TemplateSyntaxError(parserReason(message), lexerAt);
}

/** Whether the parser reached the end of the part inside a block. */
function endsInBlock(parserMessage: string): boolean {
  return /got 'EOF'/.test(parserMessage) && parserMessage.includes("'OPEN_ENDBLOCK'");
}

/** The parser's "Expecting 'X', 'Y', got 'Z'" in words a template's author reads. */
function parserReason(message: string): string {
  const got = /got '([A-Z_]+)'/.exec(message)?.[1];
  if (got === 'EOF')
    return endsInBlock(message)
      ? 'a block is not closed (a {{/…}} is missing)'
      : 'the template ends inside {{ }}';
  if (got === 'INVALID') return 'unexpected character inside {{ }} (write \\{{ for literal braces)';
  if (got === 'CLOSE' || got === 'CLOSE_UNESCAPED') return 'nothing to write inside {{ }}';
  // `{{ name | upcase }}`: a `|` outside `as |x|` is read as the end of block parameters.
  if (got === 'CLOSE_BLOCK_PARAMS')
    return 'a filter ({{ value | filter }}, as in Liquid) is not supported: send the value formatted as it should show';
  if (got !== undefined) return `unexpected ${got.toLowerCase().replace(/_/g, ' ')}`;
  return message.split('\n')[0] ?? message;
}

function place(node: Node): { line: number; column: number } | null {
  return node.loc ? { line: node.loc.start.line, column: node.loc.start.column + 1 } : null;
}

/**
 * Bounds on one part of a template where it is saved or previewed. Handlebars parses and compiles
 * on the event loop, its cost growing with the tags and with what is in them: ten thousand blocks
 * took seconds, one tag of nested `(a (a …))` twenty, a thousand 60-segment paths two, a chain of
 * a thousand `{{else if}}` most of one. Real templates have tens to a few hundred tags of a few
 * tokens each, a few blocks deep. Comments and escaped `\{{` are text.
 */
export const TEMPLATE_BOUNDS = {
  /** Tags (each `{{`: an opening, a closing, an `{{else}}`, a value). */
  tags: 1000,
  /** Characters of one tag. */
  tagLength: 256,
  /** Tokens inside the tags of a part (names, path segments, values, the braces). */
  tagTokens: 8000,
  /** Blocks open at once, each `{{else x}}` of a chain one more. */
  depth: 100,
  /** Tokens of the whole part, text between tags included. */
  tokens: 20_000,
  /**
   * Characters Handlebars' lexer copies for `{{!-- --}}` comments: it reads each by copying the
   * rest of the part (1,000 of them in 512 KiB took seconds), so a long part has room for fewer.
   */
  commentCopies: 8 * 1024 * 1024,
} as const;

/** Handlebars' lexer, as its parser holds it (`Handlebars.Parser.lexer`). */
export interface TemplateLexer {
  setInput(input: string, yy: object): unknown;
  lex(): number | string;
  readonly EOF: number;
  readonly yytext: string;
  readonly yylloc: { readonly first_line: number; readonly first_column: number };
  /** What is left to read. */
  readonly _input: string;
}

const OPENERS = new Set([
  'OPEN',
  'OPEN_BLOCK',
  'OPEN_INVERSE',
  'OPEN_INVERSE_CHAIN',
  'INVERSE',
  'OPEN_ENDBLOCK',
  'OPEN_UNESCAPED',
  'OPEN_PARTIAL',
  'OPEN_PARTIAL_BLOCK',
  'OPEN_RAW_BLOCK',
]);
const CLOSERS = new Set(['CLOSE', 'CLOSE_UNESCAPED', 'CLOSE_RAW_BLOCK', 'INVERSE']);

/**
 * The names of the tokens Handlebars' lexer reads in `source`, one at a time (the lexer's `yytext`
 * and `yylloc` are the token's meanwhile), to the end of the part or to a character it cannot read:
 * the parser stops there too, with its own words.
 */
function* tokenNames(
  source: string,
  lexer: TemplateLexer,
  names: Record<number, string>,
): Generator<string | undefined, void, undefined> {
  lexer.setInput(source, {});
  for (;;) {
    let token: number | string;
    try {
      token = lexer.lex();
    } catch {
      return;
    }
    const name = typeof token === 'number' ? names[token] : token;
    if (token === lexer.EOF || name === 'EOF') return;
    yield name;
  }
}

/**
 * Refuses a part past TEMPLATE_BOUNDS, at the token that passes one, and a sub-expression at once
 * (Herald has none). It reads the part with Handlebars' own lexer, so it sees the tags as the
 * parser will (strings, `[segments]`, comments, escapes), and stops at the first bound passed:
 * reading costs little next to parsing, and never more than the bounds allow.
 */
export function checkTags(source: string, lexer: TemplateLexer, names: Record<number, string>): void {
  const { tags: maxTags, tagLength, tagTokens, depth: maxDepth, tokens: maxTokens } = TEMPLATE_BOUNDS;
  let copied = 0;
  let tags = 0;
  let inTags = 0;
  let tokens = 0;
  let length = -1; // characters of the tag being read; -1 between tags
  const open: number[] = []; // per open block, the depth it adds (1, plus its chained elses)
  let depth = 0;
  const problem = (reason: string) =>
    new TemplateSyntaxError(reason, { line: lexer.yylloc.first_line, column: lexer.yylloc.first_column + 1 });
  for (const name of tokenNames(source, lexer, names)) {
    if (++tokens > maxTokens) throw problem(`more than ${maxTokens} tokens in one part`);
    if (name === 'OPEN_SEXPR') throw problem('helper calls in parentheses are not supported');
    // Parsed as a section named `raw`, it would show its text only where the data has a `raw`.
    if (name === 'OPEN_RAW_BLOCK')
      throw problem('raw blocks ({{{{raw}}}}) are not supported; write \\{{ where braces should show');
    // Each such token cost the lexer a look to the end of the part; the parser refuses it anyway.
    if (name === 'INVALID')
      throw problem('unexpected character inside {{ }} (write \\{{ for literal braces)');
    if (name === 'COMMENT' && /^\{\{~?!--/.test(lexer.yytext)) {
      copied += lexer._input.length;
      if (copied > TEMPLATE_BOUNDS.commentCopies)
        throw problem('too many {{!-- --}} comments for a part this long; merge them, or write {{! … }}');
    }
    if (name !== undefined && OPENERS.has(name)) {
      if (++tags > maxTags)
        throw problem(
          `more than ${maxTags} tags ({{…}}) in one part; repeat a part with #each rather than writing it out`,
        );
      length = 0;
      if (name === 'OPEN_BLOCK' || name === 'OPEN_INVERSE') {
        open.push(1);
        depth += 1;
      } else if (name === 'OPEN_INVERSE_CHAIN' && open.length > 0) {
        open[open.length - 1]! += 1;
        depth += 1;
      } else if (name === 'OPEN_ENDBLOCK') depth -= open.pop() ?? 0;
      if (depth > maxDepth) throw problem(`blocks nested more than ${maxDepth} deep`);
    }
    if (length === -1) continue;
    length += lexer.yytext.length;
    if (length > tagLength) throw problem(`a tag longer than ${tagLength} characters`);
    if (++inTags > tagTokens) throw problem(`more than ${tagTokens} tokens in the tags of one part`);
    if (name !== undefined && CLOSERS.has(name)) length = -1;
  }
}

/** What an opening tag's path expects next: its start (`@` or a name), a name, or a separator. */
type PathPart = 'start' | 'name' | 'separator';

/** What the path expects after a token of the lexer's, or null when the token ends the path. */
function pathStep(token: string | undefined, expected: PathPart): PathPart | null {
  if (token === 'DATA' && expected === 'start') return 'name';
  if (token === 'ID' && expected !== 'separator') return 'separator';
  if (token === 'SEP' && expected === 'separator') return 'name';
  return null;
}

/**
 * The innermost block still open where `source` ends, read with Handlebars' lexer: each opening
 * tag (`{{#name`, `{{^name`) pushes its name, each `{{/` pops one, `{{else}}` and `{{^}}` neither.
 */
export function innermostOpenBlock(
  source: string,
  lexer: TemplateLexer,
  names: Record<number, string>,
): OpenBlock | null {
  const open: OpenBlock[] = [];
  // The opening tag being read: its sign and path so far (`@`, then names between separators).
  let opening: (OpenBlock & { next: PathPart }) | null = null;
  for (const name of tokenNames(source, lexer, names)) {
    if (opening !== null) {
      const next = pathStep(name, opening.next);
      if (next !== null) {
        opening = { tag: opening.tag + lexer.yytext, line: opening.line, column: opening.column, next };
        continue;
      }
      // The path ended (`{{#each items}}`: `each`); an `{{else}}` or `{{^}}` names nothing.
      if (opening.next !== 'start')
        open.push({ tag: opening.tag, line: opening.line, column: opening.column });
      opening = null;
    }
    if (name === 'OPEN_BLOCK' || name === 'OPEN_INVERSE') {
      const tag = lexer.yytext.includes('^') ? '^' : '#';
      opening = { tag, line: lexer.yylloc.first_line, column: lexer.yylloc.first_column + 1, next: 'start' };
    } else if (name === 'OPEN_ENDBLOCK') open.pop();
  }
  return open.at(-1) ?? null;
}

/**
 * Handlebars' own helpers that Herald removed: its compiler still calls them by name, so a section
 * named after one would fail at every render instead of reading the data.
 */
const RESERVED = ['log', 'lookup', 'helperMissing', 'blockHelperMissing'];

/**
 * Refuses partials, decorators and helpers Herald does not register (raw blocks: `checkTags`), the
 * first in the order of the source. Unknown helpers are named all at once, where the first is: a
 * template brought from another service has several, and each would otherwise cost a save.
 */
export function refuseUnsupported(program: hbs.AST.Program): void {
  const unknown: { path: Expression; node: Node }[] = [];
  try {
    findUnsupported(program, unknown);
  } catch (error) {
    // A problem after an unknown helper is named once the helpers are mended.
    if (unknown.length === 0) throw error;
  }
  if (unknown.length > 0) throw unknownHelpers(unknown);
}

function findUnsupported(program: hbs.AST.Program, unknown: { path: Expression; node: Node }[]): void {
  walkInOrder(program, (node) => {
    switch (node.type) {
      case 'Program':
        return true;
      case 'PartialStatement':
      case 'PartialBlockStatement':
        throw new TemplateSyntaxError('partials ({{> name}}) are not supported; use a layout', place(node));
      case 'Decorator':
      case 'DecoratorBlock':
        throw new TemplateSyntaxError('decorators ({{* name}}) are not supported', place(node));
      case 'MustacheStatement': {
        const mustache = node as hbs.AST.MustacheStatement;
        if (mustache.params.length > 0 || (mustache.hash?.pairs.length ?? 0) > 0)
          unknown.push({ path: mustache.path, node });
        else checkExpression(mustache.path);
        return false;
      }
      case 'BlockStatement': {
        const block = node as hbs.AST.BlockStatement;
        const name =
          block.path.type === 'PathExpression' ? (block.path as hbs.AST.PathExpression).original : '';
        const isHelper = (BLOCK_HELPERS as readonly string[]).includes(name);
        // The blocks inside an unknown helper are looked through for more.
        if (block.path.type !== 'PathExpression' || (!isHelper && block.params.length > 0)) {
          unknown.push({ path: block.path, node });
          return true;
        }
        if (isHelper && block.params.length !== 1)
          throw new TemplateSyntaxError(`#${name} takes exactly one value`, place(node));
        if ((block.hash?.pairs.length ?? 0) > 0 && name !== 'if' && name !== 'unless')
          throw new TemplateSyntaxError(`#${name} takes no options`, place(node));
        if (RESERVED.includes(name))
          throw new TemplateSyntaxError(
            `'${name}' is a name Handlebars keeps for itself; name the section otherwise`,
            place(node),
          );
        if (!isHelper) checkExpression(block.path);
        block.params.forEach(checkExpression);
        return true;
      }
      // What a statement reads was checked with it (`checkExpression`).
      default:
        return false;
    }
  });
}

function checkExpression(expression: Expression): void {
  if (expression.type === 'SubExpression')
    throw new TemplateSyntaxError('helper calls in parentheses are not supported', place(expression));
}

function helperName(path: Expression): string {
  return path.type === 'PathExpression' ? (path as hbs.AST.PathExpression).original : path.type;
}

/** The first unknown helper, at its place, and where the others are. */
function unknownHelpers(found: readonly { path: Expression; node: Node }[]): TemplateSyntaxError {
  const [first, ...others] = found;
  const also = others.slice(0, 10).map(({ path, node }) => {
    const where = place(node);
    return `'${helperName(path)}'${where === null ? '' : ` at line ${where.line}, column ${where.column}`}`;
  });
  const more = others.length > also.length ? `, and ${others.length - also.length} more` : '';
  return new TemplateSyntaxError(
    `unknown helper '${helperName(first!.path)}' (Herald has #if, #unless, #each and #with)` +
      (also.length === 0 ? '' : `; also ${also.join(', ')}${more}`),
    place(first!.node),
  );
}
