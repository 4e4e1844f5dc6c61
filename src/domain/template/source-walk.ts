import type { SourcePlace } from './syntax-error.js';

/**
 * Ways through a parsed part in the order of its source, for the checks made where a template is
 * saved (layout-content.ts, liquid-tags.ts, other-services.ts).
 */

type Node = hbs.AST.Node;

/** A node's children, in the order of the source. */
function childrenOf(node: Node): readonly Node[] {
  switch (node.type) {
    case 'Program':
      return (node as hbs.AST.Program).body;
    case 'MustacheStatement':
    case 'BlockStatement':
    case 'SubExpression': {
      const call = node as hbs.AST.MustacheStatement | hbs.AST.BlockStatement | hbs.AST.SubExpression;
      const block = node.type === 'BlockStatement' ? (node as hbs.AST.BlockStatement) : null;
      return [
        call.path,
        ...call.params,
        ...(call.hash?.pairs ?? []).map((pair) => pair.value),
        ...(block?.program ? [block.program] : []),
        ...(block?.inverse ? [block.inverse] : []),
      ];
    }
    default:
      return [];
  }
}

/**
 * Visits a part's nodes in the order of the source: a statement, then what it reads (its path,
 * parameters and hash values), then the blocks inside it. `visit` returning false skips what is
 * inside a node.
 */
export function walkInOrder(root: Node, visit: (node: Node) => boolean): void {
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    // Children are pushed last first, so the first in the source is visited first.
    if (visit(node)) stack.push(...childrenOf(node).slice().reverse());
  }
}

/**
 * The first path (`name`, `a.b`, `@data`) that `test` picks, wherever it is read: a value, a
 * block's helper, a parameter or a hash value, in a block or out of one.
 */
export function firstPath(
  program: hbs.AST.Program,
  test: (path: hbs.AST.PathExpression) => boolean,
): hbs.AST.PathExpression | null {
  let found: hbs.AST.PathExpression | null = null;
  walkInOrder(program, (node) => {
    if (found === null && node.type === 'PathExpression' && test(node as hbs.AST.PathExpression))
      found = node as hbs.AST.PathExpression;
    return found === null;
  });
  return found;
}

/** Where a node begins, its column counted from 1 (Handlebars counts it from 0). */
export function placeOf(node: Node): SourcePlace | null {
  return node.loc ? { line: node.loc.start.line, column: node.loc.start.column + 1 } : null;
}

/** A text's source as written (Handlebars' types call `original` a StripFlags; it is the source text). */
export function sourceText(node: hbs.AST.Statement): string {
  return (node as unknown as { original: string }).original;
}

/**
 * The first of what `find` finds in the text (not the tags, not a comment) of `body` and the
 * blocks in it, in the order of the source, with its place. `find` is given each text and the
 * statements after it (`rest`), and says where in the text it found what.
 */
export function firstInText<Found extends { readonly index: number }>(
  body: readonly hbs.AST.Statement[],
  find: (text: string, rest: readonly hbs.AST.Statement[]) => Found | null,
): { found: Found; place: SourcePlace } | null {
  for (const [index, node] of body.entries()) {
    if (node.type === 'BlockStatement') {
      const block = node as hbs.AST.BlockStatement;
      const found =
        firstInText(block.program?.body ?? [], find) ?? firstInText(block.inverse?.body ?? [], find);
      if (found !== null) return found;
      continue;
    }
    if (node.type !== 'ContentStatement') continue;
    const text = sourceText(node);
    const found = find(text, body.slice(index + 1));
    if (found === null) continue;
    // Lines end as Handlebars counts them for `loc`: at \r\n, \r or \n.
    const lines = text.slice(0, found.index).split(/\r\n?|\n/);
    const last = lines.at(-1) ?? '';
    const start = node.loc.start;
    const place =
      lines.length === 1
        ? { line: start.line, column: start.column + last.length + 1 }
        : { line: start.line + lines.length - 1, column: last.length + 1 };
    return { found, place };
  }
  return null;
}
