import { escapeHtml } from './render.js';

/**
 * Placeholder values that are secrets (a new user's password, a login code, a reset token) are
 * not shown to whoever opens a message in the dashboard or the CLI unless asked for (product.md
 * §8): values of placeholders whose names contain one of these words are masked, in the request
 * data and wherever they appear in the rendered message.
 */
const SENSITIVE_NAME = /password|secret|token|code/i;

export const MASK = '••••••';

/** Values shorter than this are masked in the data but not searched for in the rendered text. */
const MIN_SEARCHED_LENGTH = 3;

export function isSensitiveName(name: string): boolean {
  return SENSITIVE_NAME.test(name);
}

export interface Content {
  readonly data: unknown;
  readonly subject: string | null;
  readonly text: string | null;
  readonly html: string | null;
}

export interface MaskedContent extends Content {
  /** How many values were masked. */
  readonly masked: number;
}

/** The template's own rendering of some data, to put masks exactly where the values went. */
export type Rerender = (data: unknown) => { subject: string; text: string; html: string | null } | null;

/**
 * Masks secret values in the data and in the rendered message. With `rerender` (the template the
 * message was rendered from), the message is rendered again from the masked data, so a mask stands
 * exactly where a secret was put and nowhere else: a template saying "your password is" keeps its
 * words even when the password is "password". That holds only while the template renders the
 * stored message again to the byte; otherwise (the template changed since) the secrets are looked
 * for in the text, as whole words only.
 */
export function maskContent(content: Content, rerender?: Rerender): MaskedContent {
  const secrets = new Set<string>();
  const data = maskValue(content.data, false, secrets);
  if (secrets.size === 0) return { ...content, data, masked: 0 };
  const again = rerender?.(content.data);
  if (
    again != null &&
    again.subject === content.subject &&
    again.text === content.text &&
    again.html === content.html
  ) {
    const masked = rerender!(data);
    if (masked !== null) return { data, ...masked, masked: secrets.size };
  }
  const searched = [...secrets]
    .filter((s) => s.length >= MIN_SEARCHED_LENGTH)
    .sort((a, b) => b.length - a.length);
  const hide = (text: string | null, html: boolean): string | null => {
    if (text === null) return null;
    let out = text;
    for (const secret of searched) {
      out = maskWord(out, secret);
      if (html) out = maskWord(out, escapeHtml(secret));
    }
    return out;
  };
  return {
    data,
    subject: hide(content.subject, false),
    text: hide(content.text, false),
    html: hide(content.html, true),
    masked: secrets.size,
  };
}

/** Letters and digits: a secret found inside a longer word is not where it was put. */
const WORD = /[\p{L}\p{N}_]/u;

/** Replaces the occurrences of `secret` that are not part of a longer word. */
function maskWord(text: string, secret: string): string {
  let out = '';
  let from = 0;
  for (let at = text.indexOf(secret); at !== -1; at = text.indexOf(secret, at + 1)) {
    if (at < from) continue;
    const before = text[at - 1] ?? '';
    const after = text[at + secret.length] ?? '';
    const joinsBefore = WORD.test(before) && WORD.test(secret[0]!);
    const joinsAfter = WORD.test(after) && WORD.test(secret[secret.length - 1]!);
    if (joinsBefore || joinsAfter) continue;
    out += text.slice(from, at) + MASK;
    from = at + secret.length;
  }
  return out + text.slice(from);
}

/** Copies a JSON value, masking every leaf under a sensitive name and collecting what it masked. */
function maskValue(value: unknown, sensitive: boolean, secrets: Set<string>): unknown {
  if (Array.isArray(value)) return value.map((item) => maskValue(item, sensitive, secrets));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value))
      out[key] = maskValue(child, sensitive || isSensitiveName(key), secrets);
    return out;
  }
  if (!sensitive || value === null || value === undefined || value === '') return value;
  secrets.add(String(value));
  return MASK;
}
