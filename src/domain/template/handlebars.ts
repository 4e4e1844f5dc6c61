import { createRequire } from 'node:module';
import type Handlebars from 'handlebars';
import type { CompiledTemplate, RenderMode } from '../render.js';
import { finishLiteral, valueFinisher, valueText } from '../render.js';
import { RenderBudget, TemplateRenderError } from './budget.js';
import {
  BLOCK_HELPERS,
  checkTags,
  innermostOpenBlock,
  refuseUnsupported,
  syntaxError,
  type TemplateLexer,
} from './handlebars-syntax.js';

/**
 * Templates in Handlebars syntax (what Amazon SES, SendGrid and Mailgun users write), rendered by
 * Handlebars itself in an environment of its own, narrowed to what Herald promises:
 *
 * - Helpers: `if`, `unless`, `each`, `with` and Mustache sections (`{{#list}}…{{/list}}`), each
 *   wrapped to count against the render's budget. `log` and `lookup` are removed, and the template
 *   is compiled with `knownHelpersOnly`, so a helper that is not one of these is refused when the
 *   template is saved. Partials and decorators are refused too.
 * - Lookups go through `ownValue` (the compiler's documented `nameLookup` extension point): own,
 *   enumerable data properties only. No prototype, no getter, no `length` of a string or array,
 *   and never through `__proto__`, even an own JSON key: exactly as Herald's placeholders always
 *   read values.
 * - Every value written (`{{x}}`, `{{{x}}}`) goes through one of Herald's own helpers, so values
 *   are turned into text, escaped and normalized as they always were (render.ts): the same bytes
 *   for every template written in the placeholder syntax, whatever Handlebars' own escaping does.
 */

/** Herald's value writers, one per mode and escaping; names no template can spell as a value. */
const WRITERS = {
  text: 'herald:text',
  subject: 'herald:subject',
  html: 'herald:html',
  raw: 'herald:raw',
} as const;
const LOOKUP = 'herald:own';

/** The render under way: Handlebars renders synchronously, so one at a time. */
let active: RenderBudget | null = null;

function writer(mode: RenderMode, raw: boolean): (value: unknown) => string {
  const finish = valueFinisher(mode, raw);
  return (value) => {
    const text = valueText(value);
    const written = text === '' ? '' : finish(text);
    active?.value(written.length);
    return written;
  };
}

/** Reads one key as render.ts does: an own, enumerable data property of an object, else nothing. */
function ownValue(parent: unknown, key: string): unknown {
  active?.lookup();
  if (parent === null || typeof parent !== 'object') return undefined;
  const descriptor = Object.getOwnPropertyDescriptor(parent, key);
  if (descriptor === undefined || !descriptor.enumerable || !('value' in descriptor)) return undefined;
  return descriptor.value;
}

type Body = (context: unknown, options?: unknown) => string;

const counted = new WeakSet<Body>();

/** Counts every body a block helper renders (each item of an `#each`) against the budget. */
function budgeted(body: Body): Body {
  // A section over a list hands its body on to #each: it is counted once.
  if (counted.has(body)) return body;
  const wrapped: Body = function (this: unknown, context, options) {
    const budget = active;
    if (budget === null) return body.call(this, context, options);
    budget.enterBlock();
    let out: string;
    try {
      out = body.call(this, context, options);
    } catch (error) {
      budget.abandonBlock();
      throw error;
    }
    budget.leaveBlock(out.length);
    return out;
  };
  counted.add(wrapped);
  return wrapped;
}

interface CompilerClass {
  prototype: { nameLookup(parent: unknown, name: string, type: string): unknown };
}

/** Handlebars and Herald's environment of it (see the top of this file). */
interface Environment {
  readonly handlebars: typeof Handlebars;
  readonly env: typeof Handlebars;
}

let loaded: Environment | null = null;

/**
 * The environment, made when a process first reads a Handlebars template: an API process that
 * never saves one does not hold Handlebars' parser and compiler.
 */
function environment(): Environment {
  return (loaded ??= createEnvironment());
}

function createEnvironment(): Environment {
  const handlebars = createRequire(import.meta.url)('handlebars') as typeof Handlebars;
  const env = handlebars.create();
  env.unregisterHelper('log');
  env.unregisterHelper('lookup');
  env.unregisterDecorator('inline');

  env.registerHelper(WRITERS.text, writer('text', false));
  env.registerHelper(WRITERS.subject, writer('subject', false));
  env.registerHelper(WRITERS.html, writer('html', false));
  env.registerHelper(WRITERS.raw, writer('html', true));
  // Registered as an object, not a function: Handlebars passes objects through unwrapped (a
  // function helper gets an options argument appended), and no template can call an object.
  env.registerHelper(LOOKUP, { read: ownValue } as unknown as Handlebars.HelperDelegate);

  // Every body a block helper renders is counted against the render's budget.
  for (const name of [...BLOCK_HELPERS, 'blockHelperMissing']) {
    const helper = env.helpers[name] as (this: unknown, ...args: unknown[]) => unknown;
    env.registerHelper(name, function (this: unknown, ...args: unknown[]) {
      const options = args[args.length - 1] as { fn: Body; inverse: Body };
      options.fn = budgeted(options.fn);
      options.inverse = budgeted(options.inverse);
      return helper.apply(this, args);
    });
  }

  /**
   * Handlebars' compiler with every data lookup (`a.b`, `this.x`, `@key`) routed to ownValue. The
   * subclassing pattern and `nameLookup` are the extension point Handlebars documents for this.
   */
  const compilers = env as unknown as { JavaScriptCompiler: CompilerClass };
  const Base = compilers.JavaScriptCompiler;
  function HeraldCompiler(this: unknown) {}
  HeraldCompiler.prototype = Object.create(Base.prototype) as object;
  Object.assign(HeraldCompiler.prototype, {
    compiler: HeraldCompiler,
    nameLookup(this: CompilerClass['prototype'], parent: unknown, name: string, type: string) {
      if (type === 'context' || type === 'data') {
        return ['helpers[', JSON.stringify(LOOKUP), '].read(', parent, ', ', JSON.stringify(name), ')'];
      }
      return Base.prototype.nameLookup.call(this, parent, name, type);
    },
  });
  compilers.JavaScriptCompiler = HeraldCompiler as unknown as CompilerClass;
  return { handlebars, env };
}

const KNOWN_HELPERS = Object.fromEntries(
  [...BLOCK_HELPERS, ...Object.values(WRITERS)].map((name) => [name, true]),
);

/** Compiled with data lookups into our helper; the runtime still denies prototype access. */
const COMPILE_OPTIONS = {
  knownHelpers: KNOWN_HELPERS,
  knownHelpersOnly: true,
  noEscape: true,
  strict: false,
  preventIndent: true,
} as const;
const RUNTIME_OPTIONS = { allowProtoMethodsByDefault: false, allowProtoPropertiesByDefault: false } as const;

type Node = hbs.AST.Node;
type Statement = hbs.AST.Statement;
type Expression = hbs.AST.Expression;

/**
 * Parses `source` (Handlebars' parser and whitespace rules), refusing what Herald does not run,
 * with the line and column of the first problem.
 */
export function parseTemplate(source: string): hbs.AST.Program {
  const program = parseSyntax(source);
  refuseUnsupported(program);
  return program;
}

/**
 * Parses `source` as Handlebars reads it, refusing only what does not parse: for the checks that
 * look for other problems beside what Herald does not run (an unknown helper, a partial), which
 * the compile names, so that the first of all of them in the text is the one named.
 */
export function parseSyntax(source: string): hbs.AST.Program {
  // Outside the try: Handlebars failing to load is not the template's fault.
  const { env } = environment();
  try {
    return env.parse(source);
  } catch (error) {
    throw syntaxError(error, lexerPlace(), () => innermostOpenBlock(source, ...parserTables()));
  }
}

/**
 * Holds a part to TEMPLATE_BOUNDS (handlebars-syntax.ts) before anything parses it: where a
 * template is saved or previewed, since its parse and compile hold the event loop.
 */
export function checkTemplateBounds(source: string): void {
  checkTags(source, ...parserTables());
}

/** Handlebars' lexer and the names of its tokens. */
function parserTables(): [TemplateLexer, Record<number, string>] {
  const { Parser: parser } = environment().handlebars as unknown as {
    Parser: { lexer: TemplateLexer; terminals_: Record<number, string> };
  };
  return [parser.lexer, parser.terminals_];
}

/** Where Handlebars' lexer stopped, for a parser error that does not say. */
function lexerPlace(): { line: number; column: number } | null {
  const at = (
    environment().handlebars as unknown as {
      Parser: { lexer: { yylloc?: { first_line: number; first_column: number } } };
    }
  ).Parser.lexer.yylloc;
  return at ? { line: at.first_line, column: at.first_column + 1 } : null;
}

/**
 * The program Handlebars compiles: literal text normalized for the mode (newlines, or a subject's
 * line breaks), each value mustache turned into a call of the mode's writer, and every path that
 * names `__proto__` made undefined.
 */
function prepare(program: hbs.AST.Program, mode: RenderMode, found: FoundPaths): void {
  const { placeholders, written } = found;
  const visit = (body: Statement[], scoped: boolean) => {
    for (let i = 0; i < body.length; i++) {
      const node = body[i] as Statement;
      if (node.type === 'ContentStatement') {
        const content = node as hbs.AST.ContentStatement;
        content.value = finishLiteral(content.value, mode);
      } else if (node.type === 'MustacheStatement') {
        const mustache = node as hbs.AST.MustacheStatement;
        if (!scoped) {
          note(mustache.path, placeholders);
          note(mustache.path, written);
        }
        const name = mode === 'html' ? (mustache.escaped ? WRITERS.html : WRITERS.raw) : WRITERS[mode];
        body[i] = {
          ...mustache,
          path: pathTo(name, mustache.path),
          params: [guard(mustache.path)],
          escaped: false,
        } as hbs.AST.MustacheStatement;
      } else if (node.type === 'BlockStatement') {
        const block = node as hbs.AST.BlockStatement;
        const name = (block.path as hbs.AST.PathExpression).original;
        const isHelper = (BLOCK_HELPERS as readonly string[]).includes(name);
        if (!scoped) block.params.forEach((param) => note(param, placeholders));
        if (!isHelper && !scoped) note(block.path, placeholders);
        block.params = block.params.map(guard);
        if (!isHelper) block.path = guard(block.path) as hbs.AST.PathExpression;
        // Inside #each, #with and sections, paths are relative to another object.
        const changesScope = scoped || name === 'each' || name === 'with' || !isHelper;
        if (block.program) visit(block.program.body, changesScope);
        if (block.inverse) visit(block.inverse.body, scoped);
      }
    }
  };
  visit(program.body, false);
}

function pathTo(name: string, near: Node): hbs.AST.PathExpression {
  return { type: 'PathExpression', data: false, depth: 0, parts: [name], original: name, loc: near.loc };
}

/** A path through `__proto__` never resolves, even through an own key of that name. */
function guard(expression: Expression): Expression {
  if (expression.type !== 'PathExpression') return expression;
  const path = expression as hbs.AST.PathExpression;
  if (!path.parts.includes('__proto__')) return path;
  return { type: 'UndefinedLiteral', value: undefined, original: undefined, loc: path.loc } as Expression;
}

/** The root paths a template names: all of them in order, and those written as values. */
interface FoundPaths {
  readonly placeholders: Set<string>;
  readonly written: Set<string>;
}

/** A placeholder as people name it: a path from the data's root, without `this` or `@`. */
function note(expression: Expression, placeholders: Set<string>): void {
  if (expression.type !== 'PathExpression') return;
  const path = expression as hbs.AST.PathExpression;
  if (path.data || path.depth > 0 || path.parts.length === 0 || path.original.startsWith('this')) return;
  placeholders.add(path.parts.join('.'));
}

/**
 * The placeholders of a part, as its compiled template lists them, read from its parse alone:
 * Handlebars' compile, which a list of templates has no use for, costs ten times the parse.
 */
export function handlebarsPlaceholders(source: string, mode: RenderMode): readonly string[] {
  const found: FoundPaths = { placeholders: new Set(), written: new Set() };
  prepare(parseTemplate(source), mode, found);
  return [...found.placeholders];
}

/**
 * Compiles a template once for rendering many times. A problem Handlebars finds only when it
 * compiles (not when it parses) is reported as a syntax error too, so whatever is saved renders.
 */
export function compileHandlebars(source: string, mode: RenderMode): CompiledTemplate {
  const program = parseTemplate(source);
  const found: FoundPaths = { placeholders: new Set(), written: new Set() };
  prepare(program, mode, found);
  const template = environment().env.compile(program, COMPILE_OPTIONS);
  try {
    // Compilation is lazy in Handlebars: a first render compiles, with nothing to write.
    renderWith(template, {}, new RenderBudget());
  } catch (error) {
    if (error instanceof TemplateRenderError) throw error;
    throw syntaxError(error, lexerPlace());
  }
  return {
    placeholders: Object.freeze([...found.placeholders]),
    sections: Object.freeze([...found.placeholders].filter((path) => !found.written.has(path))),
    render(values, budget = new RenderBudget()) {
      const out = renderWith(template, values, budget);
      return mode === 'subject' ? out.trim() : out;
    },
  };
}

function renderWith(
  template: HandlebarsTemplateDelegate,
  values: Readonly<Record<string, unknown>>,
  budget: RenderBudget,
): string {
  const outer = active;
  active = budget;
  try {
    return template(values, RUNTIME_OPTIONS);
  } catch (error) {
    if (error instanceof TemplateRenderError) throw error;
    throw new TemplateRenderError(error instanceof Error ? error.message : String(error));
  } finally {
    active = outer;
  }
}
