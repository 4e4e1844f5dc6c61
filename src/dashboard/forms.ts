import { errors, HeraldError, type ErrorCode } from '../domain/errors.js';

/** Form and query values as plain strings: a repeated field keeps its first value, others are dropped. */
export type Fields = Readonly<Record<string, string>>;

export function fieldsOf(source: unknown): Fields {
  const out: Record<string, string> = {};
  if (typeof source !== 'object' || source === null) return out;
  for (const [key, value] of Object.entries(source)) {
    if (typeof value === 'string') out[key] = value;
    else if (Array.isArray(value) && typeof value[0] === 'string') out[key] = value[0];
  }
  return out;
}

export function text(fields: Fields, name: string): string {
  return fields[name] ?? '';
}

/**
 * A textarea's value with `\n` line ends: browsers send `\r\n` (HTML's form encoding), which
 * stored as such would change every line of a template saved from the dashboard.
 */
export function multiline(fields: Fields, name: string): string {
  return text(fields, name).replace(/\r\n?/g, '\n');
}

/** Trimmed, and null when empty: optional form inputs that map to nullable columns. */
export function optional(fields: Fields, name: string): string | null {
  const value = (fields[name] ?? '').trim();
  return value === '' ? null : value;
}

/**
 * The message of an input the services refused, for the form to show again with it. Anything else
 * is thrown on to the error page: a bug, or `gone` (the thing the URL names is not there, a 404).
 */
export function refusal(error: unknown, gone?: ErrorCode): string {
  if (!(error instanceof HeraldError) || error.code === gone) throw error;
  return error.message;
}

/** A path id: digits only, so `/projects/abc` is not looked up by name. */
export function idParam(value: string): number {
  if (!/^\d{1,15}$/.test(value)) throw errors.invalidInput('Not a valid id');
  return Number(value);
}

/** A datetime-local value (`YYYY-MM-DDTHH:MM`), read as UTC; undefined when empty or malformed. */
export function utcTime(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(value)) return undefined;
  const ms = Date.parse(`${value}Z`);
  // A day the month does not have (11-31, 02-30) parses as one in the next month: not this time.
  if (Number.isNaN(ms) || !new Date(ms).toISOString().startsWith(value)) return undefined;
  return ms;
}

/** A whole number in range, or undefined when empty or malformed (a log page names the filter it leaves out). */
export function whole(value: string | undefined, min = 1, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined || !/^\d{1,15}$/.test(value)) return undefined;
  const n = Number(value);
  return n >= min && n <= max ? n : undefined;
}

/** Sample data typed as JSON in the template editor: an object, or an error message to show. */
export function parseSampleData(raw: string): { data: Record<string, unknown> } | { error: string } {
  if (raw.trim() === '') return { data: {} };
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      return { error: 'Sample data must be a JSON object, like {"user_name": "Jane"}' };
    return { data: value as Record<string, unknown> };
  } catch (error) {
    return { error: `Sample data is not valid JSON: ${(error as Error).message}` };
  }
}

/**
 * Sample data for a template's placeholders, each set to its own name (`a.b` becomes nested). The
 * objects have no prototype and `__proto__` paths are skipped: placeholder names are user input.
 */
export function sampleDataFor(placeholders: readonly string[]): string {
  const data: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const placeholder of placeholders) {
    const path = placeholder.split('.');
    if (path.includes('__proto__')) continue;
    let target = data;
    path.forEach((key, i) => {
      if (i === path.length - 1) {
        if (!Object.hasOwn(target, key)) target[key] = placeholder;
        return;
      }
      const next = target[key];
      if (typeof next !== 'object' || next === null)
        target[key] = Object.create(null) as Record<string, unknown>;
      target = target[key] as Record<string, unknown>;
    });
  }
  return JSON.stringify(data, null, 2);
}
