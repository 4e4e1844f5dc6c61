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

export function maskContent(content: Content): MaskedContent {
  const secrets = new Set<string>();
  const data = maskValue(content.data, false, secrets);
  const searched = [...secrets]
    .filter((s) => s.length >= MIN_SEARCHED_LENGTH)
    .sort((a, b) => b.length - a.length);
  const hide = (text: string | null, html: boolean): string | null => {
    if (text === null) return null;
    let out = text;
    for (const secret of searched) {
      out = out.split(secret).join(MASK);
      if (html) out = out.split(escapeHtml(secret)).join(MASK);
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
