import { errors } from '../domain/errors.js';
import type { TemplateEngine } from '../domain/message.js';
import type { CurrentTemplate } from '../storage/template-versions.js';
import { checkSizes, type VariantContent } from './template-checks.js';
import { DEFAULT, localeOf, variantsOf } from './template-model.js';

/**
 * A template version's content: its variants as a whole-template PUT gives them, the rows that
 * store them, and whether a version already holds them.
 */

/** An empty HTML body is none. */
export const emptyHtml = (html: string | null | undefined) => (html === '' ? null : html);

/** A whole template as the admin API's PUT gives it: every variant, and its layout's name. */
export interface TemplateContent {
  readonly subject: string;
  readonly text: string;
  readonly html?: string | null;
  readonly layout?: string | null;
  readonly locales?: Readonly<Record<string, Omit<TemplateContent, 'layout' | 'locales'>>>;
}

/** Locale variants a template may have: far more than any product speaks, few enough to check. */
export const MAX_LOCALE_VARIANTS = 100;

/**
 * The variants of a PUT by canonical tag, each within the sizes of a part; their templates are
 * checked by `checkVariants`, as a create's or update's are.
 */
export function variantsFrom(input: TemplateContent): Map<string, VariantContent> {
  const variants = new Map<string, VariantContent>();
  const locales = Object.entries(input.locales ?? {});
  if (locales.length > MAX_LOCALE_VARIANTS)
    throw errors.invalidInput(`A template can have at most ${MAX_LOCALE_VARIANTS} locale variants`);
  for (const [tag, content] of [[DEFAULT, input] as const, ...locales]) {
    const locale = tag === DEFAULT ? DEFAULT : localeOf({ locale: tag });
    if (tag !== DEFAULT && (locale === DEFAULT || variants.has(locale)))
      throw errors.invalidInput(`Locale ${JSON.stringify(tag)} is given twice or is not a locale`);
    const variant = { subject: content.subject, text: content.text, html: emptyHtml(content.html) ?? null };
    checkSizes(variant);
    variants.set(locale, variant);
  }
  return variants;
}

export function variantRows(variants: ReadonlyMap<string, VariantContent>) {
  return [...variants].map(([locale, v]) => ({
    locale,
    subject: v.subject,
    text_body: v.text,
    html_body: v.html,
  }));
}

/** Whether the current version already is this content (in the engine new versions are written in). */
export function sameContent(
  current: CurrentTemplate,
  variants: ReadonlyMap<string, VariantContent>,
  layoutId: number | null,
  engine: TemplateEngine = 'handlebars',
): boolean {
  const stored = variantsOf(current);
  if (current.version.engine !== engine || current.version.layout_id !== layoutId) return false;
  if (stored.size !== variants.size) return false;
  return [...variants].every(([locale, v]) => {
    const s = stored.get(locale);
    return s !== undefined && s.subject === v.subject && s.text === v.text && s.html === v.html;
  });
}
