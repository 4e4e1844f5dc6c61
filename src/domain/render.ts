import { HEADER_BREAKS } from './header-break.js';
import { RenderBudget } from './template/budget.js';

export type RenderMode = 'text' | 'html' | 'subject';

export interface CompiledTemplate {
  /** Placeholder paths in order of first appearance, deduplicated, e.g. ['user_name', 'order.id']. */
  readonly placeholders: readonly string[];
  /**
   * The placeholders only ever given to a block (`{{#each list}}`, `{{#if trial}}`), never written
   * as a value: a list or an object is what such a block reads, so only a missing one is blank.
   */
  readonly sections: readonly string[];
  /** Throws TemplateRenderError past the budget (one per message, shared by its parts). */
  render(values: Readonly<Record<string, unknown>>, budget?: RenderBudget): string;
}

/*
 * The placeholder engine: `{{name}}`, `{{ a.b }}`, `{{{raw}}}` and nothing else, every other brace
 * literal text. Templates saved before Herald spoke Handlebars keep rendering with it, byte for
 * byte (their versions say so); template/handlebars.ts writes values with the same functions.
 */

interface Slot {
  /** null when the path can never resolve (it names `__proto__`). */
  readonly path: readonly string[] | null;
  /** Transforms the value's text for the mode: escaping, newline normalization, control removal. */
  readonly finish: (text: string) => string;
}

// Triple braces are tried first so `{{{name}}}` is one raw placeholder, not `{` + `{{name}}` + `}`.
// A mismatched `{{{name}}` falls through to the double form one character later, leaving `{` literal.
// Anything between braces that is not a dotted path (`{{ 1 + 2 }}`, `{{}}`) does not match and stays text.
const PATH = '[A-Za-z0-9_-]+(?:\\.[A-Za-z0-9_-]+)*';
const PLACEHOLDER = new RegExp(
  `\\{\\{\\{[ \\t]*(${PATH})[ \\t]*\\}\\}\\}|\\{\\{[ \\t]*(${PATH})[ \\t]*\\}\\}`,
  'g',
);

/**
 * Parses the template once. Rendering sits on the delivery hot path and a template is rendered
 * many times, so `render` does no parsing: it walks the precomputed literals and slots and
 * concatenates. Literals are normalized for the mode here; a value is only rewritten (by a
 * character scan, or a regex when it holds a CR) if it needs it.
 */
/** A piece of a placeholder-engine source: literal text, or a placeholder (`raw`: triple braces). */
export type PlaceholderPiece = string | { readonly path: string; readonly raw: boolean };

/** Splits a placeholder-engine source into its literal text and placeholders, in order. */
export function placeholderPieces(source: string): PlaceholderPiece[] {
  const pieces: PlaceholderPiece[] = [];
  let last = 0;
  for (const match of source.matchAll(PLACEHOLDER)) {
    pieces.push(source.slice(last, match.index));
    pieces.push({ path: match[1] ?? match[2] ?? '', raw: match[1] !== undefined });
    last = match.index + match[0].length;
  }
  pieces.push(source.slice(last));
  return pieces;
}

export function compileTemplate(source: string, mode: RenderMode): CompiledTemplate {
  const finish = mode === 'subject' ? replaceControls : normalizeNewlines;
  // Invariant: literals.length === slots.length + 1; literal i comes before slot i.
  const literals: string[] = [];
  const slots: Slot[] = [];
  const placeholders: string[] = [];
  for (const piece of placeholderPieces(source)) {
    if (typeof piece === 'string') {
      literals.push(finish(piece));
      continue;
    }
    const path = piece.path.split('.');
    // Even an own `__proto__` key (JSON.parse creates one) is refused: values are caller data, and a
    // template that walks through `__proto__` is an attack, not a use case.
    slots.push({ path: path.includes('__proto__') ? null : path, finish: valueFinisher(mode, piece.raw) });
    if (!placeholders.includes(piece.path)) placeholders.push(piece.path);
  }

  const head = literals[0] ?? '';
  const count = slots.length;
  const frozenPlaceholders = Object.freeze(placeholders);

  return {
    placeholders: frozenPlaceholders,
    sections: [],
    render(values, budget = new RenderBudget()) {
      let out = head;
      for (let i = 0; i < count; i++) {
        const slot = slots[i] as Slot;
        if (slot.path !== null) budget.lookup(slot.path.length);
        const text = slot.path === null ? '' : valueText(lookup(values, slot.path));
        const written = text === '' ? '' : slot.finish(text);
        budget.value(written.length);
        out += written + (literals[i + 1] as string);
      }
      // Trimming is on the whole string: a blank value at either end must not leave a space.
      return mode === 'subject' ? out.trim() : out;
    },
  };
}

/** True when the placeholder `path` (dotted) renders as nothing with these values. */
export function rendersBlank(values: unknown, path: string): boolean {
  const keys = path.split('.');
  return keys.includes('__proto__') || valueText(lookup(values, keys)) === '';
}

/** True when a block's value `path` (dotted) is missing from these values (absent or null). */
export function sectionMissing(values: unknown, path: string): boolean {
  const keys = path.split('.');
  return keys.includes('__proto__') || (lookup(values, keys) ?? null) === null;
}

/** Literal template text as a mode writes it: newlines normalized, or a subject's breaks replaced. */
export function finishLiteral(text: string, mode: RenderMode): string {
  return mode === 'subject' ? replaceControls(text) : normalizeNewlines(text);
}

/** How a mode writes a value's text; `raw` is `{{{name}}}`, which the HTML body does not escape. */
export function valueFinisher(mode: RenderMode, raw: boolean): (text: string) => string {
  if (mode === 'subject') return replaceControls;
  if (mode === 'html' && !raw) return (text) => escapeHtml(normalizeValueNewlines(text));
  return normalizeValueNewlines;
}

/**
 * Reads a dotted path through own enumerable data properties only. Inherited keys
 * (`constructor`, `__proto__`, `toString`) and accessors are never followed, so a template can
 * neither reach the prototype chain nor run a getter; nothing is ever written.
 */
function lookup(values: unknown, path: readonly string[]): unknown {
  let current = values;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    const descriptor = Object.getOwnPropertyDescriptor(current, key);
    if (descriptor === undefined || !descriptor.enumerable || !('value' in descriptor)) return undefined;
    current = descriptor.value;
  }
  return current;
}

/** A value as text: strings as they are, numbers and booleans as their text, anything else blank. */
export function valueText(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value);
    default:
      return '';
  }
}

export function escapeHtml(value: string): string {
  // A character scan, not a regex: most values need no escaping and are returned untouched.
  let out = '';
  let last = 0;
  for (let i = 0; i < value.length; i++) {
    let entity: string;
    switch (value.charCodeAt(i)) {
      case 38:
        entity = '&amp;';
        break;
      case 60:
        entity = '&lt;';
        break;
      case 62:
        entity = '&gt;';
        break;
      case 34:
        entity = '&quot;';
        break;
      case 39:
        entity = '&#39;';
        break;
      default:
        continue;
    }
    out += value.slice(last, i) + entity;
    last = i + 1;
  }
  return last === 0 ? value : out + value.slice(last);
}

export function normalizeNewlines(text: string): string {
  return text.replace(/\r\n?/g, '\n');
}

// Each value is normalized on its own, so a value ending in CR never pairs with a template LF.
function normalizeValueNewlines(text: string): string {
  return text.includes('\r') ? normalizeNewlines(text) : text;
}

/** Subject lines become one header line: each header-breaking character becomes a space. */
function replaceControls(text: string): string {
  return text.replace(HEADER_BREAKS, ' ');
}
