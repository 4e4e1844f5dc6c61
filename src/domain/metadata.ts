import { errors } from './errors.js';
import { unstorableText } from './storable-text.js';

/**
 * A send's `metadata` (product.md §12): the caller's own labels for a message (an order id, a
 * tenant), kept with it, returned in its status body and every event, and searchable in the
 * delivery log as `metadata.KEY=VALUE`. Bounded so that it stays a label, not a second payload.
 */

export const MAX_METADATA_KEYS = 20;
export const MAX_METADATA_KEY_LENGTH = 40;
export const MAX_METADATA_VALUE_LENGTH = 500;
/** How many `metadata.KEY=VALUE` conditions one search may carry: no message has more keys. */
export const MAX_METADATA_FILTERS = MAX_METADATA_KEYS;

export type Metadata = Readonly<Record<string, string>>;

/** A key: 1–40 of `[A-Za-z0-9_.-]`, so it is safe in a query string, a path and a log line. */
export const METADATA_KEY = /^[A-Za-z0-9_.-]{1,40}$/;

const RULES = `at most ${MAX_METADATA_KEYS} keys of 1–${MAX_METADATA_KEY_LENGTH} characters A-Z a-z 0-9 _ . -, each with a string of at most ${MAX_METADATA_VALUE_LENGTH} characters`;

/** What is wrong with one value, or null. */
function valueProblem(key: string, value: unknown): string | null {
  if (typeof value !== 'string') return `the value of '${key}' is not a string`;
  if (value.length > MAX_METADATA_VALUE_LENGTH)
    return `the value of '${key}' is longer than ${MAX_METADATA_VALUE_LENGTH} characters`;
  const problem = unstorableText(value);
  return problem === null ? null : `the value of '${key}' ${problem}`;
}

/**
 * `metadata`: absent, null or `{}` is none (null); otherwise an object of string values as the
 * rules say. Throws `Invalid 'metadata' (…)` naming the first problem.
 */
export function parseMetadata(value: unknown): Metadata | null {
  if (value === undefined || value === null) return null;
  const refuse = (problem: string) => errors.invalidField(`Invalid 'metadata' (${problem})`);
  if (typeof value !== 'object' || Array.isArray(value)) throw refuse(`must be a JSON object: ${RULES}`);
  const entries = Object.entries(value);
  if (entries.length > MAX_METADATA_KEYS) throw refuse(`more than ${MAX_METADATA_KEYS} keys`);
  for (const [key, item] of entries) {
    if (!METADATA_KEY.test(key))
      throw refuse(
        `key ${JSON.stringify(key.slice(0, 60))} is not 1–${MAX_METADATA_KEY_LENGTH} characters A-Z a-z 0-9 _ . -`,
      );
    const problem = valueProblem(key, item);
    if (problem !== null) throw refuse(problem);
  }
  return entries.length === 0 ? null : (Object.fromEntries(entries) as Metadata);
}

/** One condition of a delivery-log search: the message's metadata has exactly this value at this key. */
export interface MetadataFilter {
  readonly key: string;
  readonly value: string;
}

/**
 * The `metadata.KEY=VALUE` conditions of a search's query (the dashboard's delivery log and the
 * admin API), in the order given; a query without any gives none. A repeated parameter's first
 * value counts. Throws `Invalid 'metadata.KEY' filter (…)` for a key or value a message could not
 * carry, so a search for it is a mistake rather than an empty page.
 */
export function metadataFilters(query: Readonly<Record<string, unknown>>): MetadataFilter[] {
  const filters: MetadataFilter[] = [];
  for (const [name, raw] of Object.entries(query)) {
    if (!name.startsWith('metadata.')) continue;
    const key = name.slice('metadata.'.length);
    const value = Array.isArray(raw) ? (raw[0] as unknown) : raw;
    const label = `Invalid '${name.slice(0, 60)}' filter`;
    if (!METADATA_KEY.test(key))
      throw errors.invalidField(
        `${label} (a key is 1–${MAX_METADATA_KEY_LENGTH} characters A-Z a-z 0-9 _ . -)`,
      );
    const problem = valueProblem(key, value);
    if (problem !== null) throw errors.invalidField(`${label} (${problem})`);
    filters.push({ key, value: value as string });
  }
  if (filters.length > MAX_METADATA_FILTERS)
    throw errors.invalidField(`At most ${MAX_METADATA_FILTERS} metadata filters`);
  return filters;
}

/**
 * A `KEY=VALUE` typed into the dashboard's metadata filter, as the condition it names; null when
 * empty. Throws as `metadataFilters` does.
 */
export function metadataFilterText(text: string): MetadataFilter | null {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  const eq = trimmed.indexOf('=');
  if (eq < 0) throw errors.invalidField('A metadata filter is KEY=VALUE, e.g. order_id=o-77');
  const [filter] = metadataFilters({ [`metadata.${trimmed.slice(0, eq).trim()}`]: trimmed.slice(eq + 1) });
  return filter ?? null;
}
