import { TemplateSyntaxError } from './syntax-error.js';

/**
 * What Herald accepts of Handlebars' syntax (see handlebars.ts): the four block helpers and
 * sections, plain values; no partials, decorators, sub-expressions or other helpers. Each refusal
 * says where, in words a template's author reads.
 */

/** The block helpers a template may use; anything else is refused when the template is saved. */
export const BLOCK_HELPERS = ['if', 'unless', 'each', 'with'] as const;

type Node = hbs.AST.Node;
type Expression = hbs.AST.Expression;

/** A parse error in words a template's author reads, at `lexerAt` when the error does not say where. */
export function syntaxError(
  error: unknown,
  lexerAt: { line: number; column: number } | null,
): TemplateSyntaxError {
  if (error instanceof RangeError) return new TemplateSyntaxError('blocks nested too deeply', null);
  const message = error instanceof Error ? error.message : String(error);
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

/** The parser's "Expecting 'X', 'Y', got 'Z'" in words a template's author reads. */
function parserReason(message: string): string {
  const got = /got '([A-Z_]+)'/.exec(message)?.[1];
  if (got === 'EOF')
    return message.includes("'OPEN_ENDBLOCK'")
      ? 'a block is not closed (its {{/name}} is missing)'
      : 'the template ends inside {{ }}';
  if (got === 'INVALID') return 'unexpected character inside {{ }} (write \\{{ for literal braces)';
  if (got === 'CLOSE' || got === 'CLOSE_UNESCAPED') return 'nothing to write inside {{ }}';
  if (got !== undefined) return `unexpected ${got.toLowerCase().replace(/_/g, ' ')}`;
  return message.split('\n')[0] ?? message;
}

function place(node: Node): { line: number; column: number } | null {
  return node.loc ? { line: node.loc.start.line, column: node.loc.start.column + 1 } : null;
}

/**
 * Bounds on the tags (each `{{`: an opening, a closing, an `{{else}}`, a value) of one part of a
 * template, where it is saved or previewed. Handlebars parses and compiles on the event loop, and
 * its cost grows with the tags and with what is inside them: ten thousand blocks took seconds, one
 * tag of 16 KB of nested `(a (a …))` twenty, a thousand 60-segment paths two. Within these bounds
 * a part costs at most a few hundred milliseconds here; real templates have tens to a few hundred
 * tags of a few dozen characters each. Comments are not counted: Handlebars skips them whole.
 */
export const MAX_TAGS = 1000;
export const MAX_TAG_LENGTH = 256;
export const MAX_TAG_TEXT = 16 * 1024;

/**
 * Refuses a part past the bounds above, at the tag that passes one. A scan, not a parse: it must
 * cost nothing next to what it prevents.
 */
export function checkTags(source: string): void {
  let count = 0;
  let text = 0;
  for (let at = source.indexOf('{{'); at !== -1;) {
    const comment = source.startsWith('{{!', at);
    const closer = source.startsWith('{{!--', at) ? '--}}' : '}}';
    const close = source.indexOf(closer, at + 2);
    // An unclosed tag reaches the end: the parser reads all of it before it says so.
    const end = close === -1 ? source.length : close + closer.length;
    // `\{{` is literal text, however far its braces are from any `}}`.
    const escaped = at > 0 && source[at - 1] === '\\' && source[at - 2] !== '\\';
    if (++count > MAX_TAGS)
      throw tagProblem(
        source,
        at,
        `more than ${MAX_TAGS} tags ({{…}}) in one part; repeat a part with #each rather than writing it out`,
      );
    if (!comment && !escaped) {
      if (end - at > MAX_TAG_LENGTH)
        throw tagProblem(source, at, `a tag longer than ${MAX_TAG_LENGTH} characters`);
      text += end - at;
      if (text > MAX_TAG_TEXT)
        throw tagProblem(source, at, `more than ${MAX_TAG_TEXT} characters of tags ({{…}}) in one part`);
    }
    at = source.indexOf('{{', escaped ? at + 2 : end);
  }
}

function tagProblem(source: string, at: number, reason: string): TemplateSyntaxError {
  const before = source.slice(0, at);
  return new TemplateSyntaxError(reason, {
    line: before.split('\n').length,
    column: at - before.lastIndexOf('\n'),
  });
}

/**
 * Handlebars' own helpers that Herald removed: its compiler still calls them by name, so a section
 * named after one would fail at every render instead of reading the data.
 */
const RESERVED = ['log', 'lookup', 'helperMissing', 'blockHelperMissing'];

/** Refuses partials, decorators, raw blocks and helpers Herald does not register. */
export function refuseUnsupported(program: hbs.AST.Program): void {
  const stack: Node[] = [program];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    switch (node.type) {
      case 'Program':
        stack.push(...(node as hbs.AST.Program).body);
        break;
      case 'PartialStatement':
      case 'PartialBlockStatement':
        throw new TemplateSyntaxError('partials ({{> name}}) are not supported; use a layout', place(node));
      case 'Decorator':
      case 'DecoratorBlock':
        throw new TemplateSyntaxError('decorators ({{* name}}) are not supported', place(node));
      case 'MustacheStatement': {
        const mustache = node as hbs.AST.MustacheStatement;
        if (mustache.params.length > 0 || (mustache.hash?.pairs.length ?? 0) > 0)
          throw unknownHelper(mustache.path, node);
        checkExpression(mustache.path);
        break;
      }
      case 'BlockStatement': {
        const block = node as hbs.AST.BlockStatement;
        const name =
          block.path.type === 'PathExpression' ? (block.path as hbs.AST.PathExpression).original : '';
        const isHelper = (BLOCK_HELPERS as readonly string[]).includes(name);
        if (block.path.type !== 'PathExpression' || (!isHelper && block.params.length > 0))
          throw unknownHelper(block.path, node);
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
        if (block.program) stack.push(block.program);
        if (block.inverse) stack.push(block.inverse);
        break;
      }
      default:
        break;
    }
  }
}

function checkExpression(expression: Expression): void {
  if (expression.type === 'SubExpression')
    throw new TemplateSyntaxError('helper calls in parentheses are not supported', place(expression));
}

function unknownHelper(path: Expression, node: Node): TemplateSyntaxError {
  const name = path.type === 'PathExpression' ? (path as hbs.AST.PathExpression).original : path.type;
  return new TemplateSyntaxError(
    `unknown helper '${name}' (Herald has #if, #unless, #each and #with)`,
    place(node),
  );
}
