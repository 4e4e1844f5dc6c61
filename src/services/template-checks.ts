import { errors, type HeraldError } from '../domain/errors.js';
import { compilePart, type TemplateEngine } from '../domain/message.js';
import type { RenderMode } from '../domain/render.js';
import { MAX_TEMPLATE_NAME_LENGTH } from '../domain/send-request.js';
import { checkTemplateBounds } from '../domain/template/handlebars.js';
import { refuseHiddenInNames } from '../domain/template/hidden-in-names.js';
import { refuseLiquidTags } from '../domain/template/liquid-tags.js';
import { refuseOtherServicesTags } from '../domain/template/other-services.js';
import { refuseContentVariable } from '../domain/template/layout-content.js';
import { comesBefore, TemplateSyntaxError } from '../domain/template/syntax-error.js';

/** Names are bounded like the `template` field of a send request, so every template can be sent. */
export const TEMPLATE_LIMITS = {
  name: MAX_TEMPLATE_NAME_LENGTH,
  subject: 1000,
  sampleData: 64 * 1024,
  text: 256 * 1024,
  html: 512 * 1024,
} as const;

/** The content of one variant (the default, or a locale's). */
export interface VariantContent {
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
}

/** The error every save of a template (or layout) that does not parse gets: `Invalid template: …`. */
export function invalidTemplate(detail: string): HeraldError {
  return errors.invalidInput(`Invalid template: ${detail}`);
}

/**
 * Characters that show as nothing and join no letters: a zero-width space, a word joiner, a byte
 * order mark, the direction marks and the bidirectional embeddings, overrides and isolates. In a
 * name they make two names look alike, or one look like another, in every list and log. (The
 * joiners some scripts and emoji need, U+200C and U+200D, are not among them.)
 */
const INVISIBLE = /[\u200B\u200E\u200F\u061C\u2060\uFEFF\u202A-\u202E\u2066-\u2069]/u;

export function checkName(name: string, what = 'Template'): string {
  // Names are matched exactly (case-sensitive) against what callers send, so none is trimmed.
  if (name === '' || name.length > TEMPLATE_LIMITS.name || /[\s\p{Cc}]/u.test(name) || INVISIBLE.test(name)) {
    throw errors.invalidInput(
      `${what} name must be 1–${TEMPLATE_LIMITS.name} characters without spaces or invisible characters`,
    );
  }
  // A path segment of `.` or `..` is removed from a URL by browsers: its page could not be opened.
  if (name === '.' || name === '..') throw errors.invalidInput(`${what} name cannot be '.' or '..'`);
  return name;
}

export function checkSizes(input: {
  subject?: string | undefined;
  text?: string | null | undefined;
  html?: string | null | undefined;
  sampleData?: string | null | undefined;
}): void {
  if (
    input.subject !== undefined &&
    (input.subject.trim() === '' || input.subject.length > TEMPLATE_LIMITS.subject)
  ) {
    throw errors.invalidInput(`Subject must be 1–${TEMPLATE_LIMITS.subject} characters`);
  }
  if (input.text != null && input.text.length > TEMPLATE_LIMITS.text) {
    throw errors.invalidInput(`Text body must be at most ${TEMPLATE_LIMITS.text} characters`);
  }
  if (input.html != null && input.html.length > TEMPLATE_LIMITS.html) {
    throw errors.invalidInput(`HTML body must be at most ${TEMPLATE_LIMITS.html} characters`);
  }
  if (input.sampleData != null && input.sampleData.length > TEMPLATE_LIMITS.sampleData) {
    throw errors.invalidInput(`Sample data must be at most ${TEMPLATE_LIMITS.sampleData} characters`);
  }
}

const PART_NAMES: Record<RenderMode, string> = { subject: 'subject', text: 'text body', html: 'HTML body' };

/** Runs a check of one part, turning a syntax error into `Invalid template: <part>, line L, column C: …`. */
function checkPart(mode: RenderMode, label: string, check: () => void): void {
  try {
    check();
  } catch (error) {
    if (error instanceof TemplateSyntaxError)
      throw invalidTemplate(`${PART_NAMES[mode]}${label}, ${error.message}`);
    throw error;
  }
}

/**
 * What a Handlebars part saved must not do: read `@content`, which only renders as nothing (a
 * template's body goes into its layout at `{{{content}}}`: refuseContentVariable); hold another
 * service's tags, which are sent as written or render as nothing (refuseLiquidTags,
 * refuseOtherServicesTags); read a name with a character no one sees, which renders blank
 * (refuseHiddenInNames).
 */
const SAVE_RULES = [refuseContentVariable, refuseLiquidTags, refuseOtherServicesTags, refuseHiddenInNames];

/**
 * A part saved must compile, and, held to the rules of a save, keep to them (SAVE_RULES); of its
 * problems the one that comes first in its text is named, whether the compile or a rule found it.
 * A Handlebars part is held to the bounds of its tags before anything parses it
 * (checkTemplateBounds), since a parse and a compile hold the event loop.
 */
export function checkSavedPart(
  source: string,
  mode: RenderMode,
  engine: TemplateEngine,
  options: { readonly label?: string; readonly rules: boolean },
): void {
  checkPart(mode, options.label ?? '', () => {
    if (engine === 'handlebars') checkTemplateBounds(source);
    const compiles = (part: string) => void compilePart(part, mode, engine);
    firstRefusal(source, options.rules && engine === 'handlebars' ? [compiles, ...SAVE_RULES] : [compiles]);
  });
}

/**
 * Runs every check on a part and throws the problem that comes first in its text, whichever check
 * found it: an author fixing a pasted template from the top meets its problems in that order.
 */
function firstRefusal(source: string, checks: readonly ((source: string) => void)[]): void {
  let first: TemplateSyntaxError | null = null;
  for (const check of checks) {
    try {
      check(source);
    } catch (error) {
      if (!(error instanceof TemplateSyntaxError)) throw error;
      if (first === null || comesBefore(error.place, first.place)) first = error;
    }
  }
  if (first !== null) throw first;
}

/**
 * Every part of a variant must compile and keep to the rules of a save (checkSavedPart), checked in
 * order: subject, text, HTML. A part the same as in `saved` (the variant as stored) is not held to
 * the rules, so a template saved before them can still have its other parts changed, a variant
 * removed, or be put again as it is. `locale` names the variant in the error.
 */
export function checkVariant(
  content: VariantContent,
  engine: TemplateEngine,
  locale: string,
  saved?: VariantContent,
): void {
  const label = locale === '' ? '' : ` (${locale})`;
  for (const [mode, source, stored] of partsOf(content, saved))
    checkSavedPart(source, mode, engine, { label, rules: !sameText(source, stored) });
}

/**
 * The rules of a save alone (SAVE_RULES), as checkVariant holds a variant whose parts compile to
 * them: what a preview shows beside its rendering.
 */
export function checkSaveRules(
  content: VariantContent,
  engine: TemplateEngine,
  locale: string,
  saved?: VariantContent,
): void {
  if (engine !== 'handlebars') return;
  const label = locale === '' ? '' : ` (${locale})`;
  for (const [mode, source, stored] of partsOf(content, saved))
    if (!sameText(source, stored)) checkPart(mode, label, () => firstRefusal(source, SAVE_RULES));
}

/** A variant's parts, each with its stored form in `saved`; an empty HTML part is none. */
function partsOf(
  content: VariantContent,
  saved?: VariantContent,
): [RenderMode, string, string | null | undefined][] {
  const parts: [RenderMode, string, string | null | undefined][] = [
    ['subject', content.subject, saved?.subject],
    ['text', content.text, saved?.text],
  ];
  if (content.html !== null && content.html !== '') parts.push(['html', content.html, saved?.html]);
  return parts;
}

/**
 * Checks each variant (checkVariant) against its stored form in `saved`, with a turn of the event
 * loop between variants: a template may have a hundred, each compile holds the process, and the
 * sends of every project should wait for one variant's compile at most, not the whole template's.
 */
export async function checkVariants(
  variants: ReadonlyMap<string, VariantContent>,
  engine: TemplateEngine,
  saved?: ReadonlyMap<string, VariantContent>,
): Promise<void> {
  let turn: Promise<unknown> | null = null;
  for (const [locale, content] of variants) {
    if (turn !== null) await turn;
    checkVariant(content, engine, locale, saved?.get(locale));
    turn = new Promise((resolve) => setImmediate(resolve));
  }
}

/** Whether a part is the one stored, line ends aside (a form sends `\r\n` as `\n`, dashboard/forms.ts). */
function sameText(part: string, stored: string | null | undefined): boolean {
  return typeof stored === 'string' && part.replace(/\r\n?/g, '\n') === stored.replace(/\r\n?/g, '\n');
}
