/**
 * Locale variants of a template (product.md §11). A tag is BCP 47 (`fr`, `fr-CA`, `zh-Hant-TW`),
 * at most 35 characters, kept in its canonical case (`fr-ca` is stored as `fr-CA`). A send's
 * `locale` picks the variant with the same tag (case-insensitive), else the one of its language
 * (`fr` for `fr-CA`), else the default.
 */

export const MAX_LOCALE_LENGTH = 35;

/** The canonical form of a well-formed BCP 47 tag, or null. */
export function canonicalLocale(tag: unknown): string | null {
  if (typeof tag !== 'string' || tag === '' || tag.length > MAX_LOCALE_LENGTH) return null;
  // Intl accepts the Unicode extension syntax as BCP 47 does; it refuses `_`, which BCP 47 does too.
  if (!/^[A-Za-z0-9-]+$/.test(tag)) return null;
  try {
    const [canonical] = Intl.getCanonicalLocales(tag);
    return canonical !== undefined && canonical.length <= MAX_LOCALE_LENGTH ? canonical : null;
  } catch {
    return null;
  }
}

/** A tag's language: its first subtag, lowercased. */
function language(tag: string): string {
  return (tag.split('-')[0] ?? tag).toLowerCase();
}

/**
 * Which of `locales` (the variants' tags, not the default) renders a send that asked for
 * `requested`; null means the default variant.
 */
export function chooseLocale(locales: readonly string[], requested: string | null): string | null {
  if (requested === null) return null;
  const wanted = requested.toLowerCase();
  const exact = locales.find((tag) => tag.toLowerCase() === wanted);
  if (exact !== undefined) return exact;
  const lang = language(requested);
  return locales.find((tag) => tag.toLowerCase() === lang) ?? null;
}
