/** A lone UTF-16 surrogate: a string that is not Unicode text, which no store keeps as sent. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Why a string cannot be stored as it was sent, or null: a NUL character (PostgreSQL text cannot
 * hold one), or a lone surrogate (`"\ud800"` in JSON: it would be stored as U+FFFD, and read back
 * as something other than was written).
 */
export function unstorableText(text: string): string | null {
  if (text.includes('\0')) return 'contains a NUL character';
  if (LONE_SURROGATE.test(text)) return 'contains a lone surrogate, which is not Unicode text';
  return null;
}

/**
 * Text from outside that is kept whatever it holds (a bounce report's fields): NUL characters
 * dropped and lone surrogates made U+FFFD, so that every store keeps it, and keeps it alike.
 */
export function storableText(text: string): string {
  return text.replace(/\0/g, '').replace(/\p{Cs}/gu, '\uFFFD');
}
