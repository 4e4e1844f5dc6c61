import type { Mailbox } from './address.js';
import { mailboxProblem, parseGivenMailbox } from './address.js';
import { unstorableText } from './storable-text.js';
import { parseAttachments, type Attachment } from './attachments.js';
import { jsonByteLength } from './canonical-json.js';
import { HeraldError, errors } from './errors.js';
import { parseMetadata, type Metadata } from './metadata.js';
import { canonicalLocale } from './template/locale.js';

/**
 * The send request as the domain sees it, checked in the order the product fixes: `template`,
 * then `type`, then `to` (spec §7.1), then any field Herald does not know, then the rest in the
 * order of SEND_FIELDS.
 */

/**
 * Every top-level field of a send (spec §4.1 and product.md §6, §11, §12). Any other is refused
 * with `Unknown field 'NAME'`: a caller who sends `cc` must not believe it went out.
 */
export const SEND_FIELDS = [
  'template',
  'type',
  'to',
  'variables',
  'data',
  'send_at',
  'locale',
  'reply_to',
  'metadata',
  'attachments',
] as const;
const KNOWN_FIELDS: ReadonlySet<string> = new Set(SEND_FIELDS);

export const MAX_TEMPLATE_NAME_LENGTH = 200;
/** `data` and `variables` nest at most this deep (the object itself is level 1). */
export const MAX_PLACEHOLDER_DEPTH = 32;
/** A scheduled send may ask for a time at most this far ahead (product.md §6). */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 86_400_000;

export interface SendRequest {
  readonly template: string;
  /** null: no recipient given, so the project's contact email is used. */
  readonly to: Mailbox | null;
  readonly data: Readonly<Record<string, unknown>>;
  readonly type: 'email';
  /** When a scheduled send asked to go out (epoch ms); null to send now. May lie in the past. */
  readonly sendAt: number | null;
  /** The BCP 47 tag of the template variant asked for (canonical case); null for the default. */
  readonly locale?: string | null;
  /** The Reply-To mailbox; null or absent for none. */
  readonly replyTo?: Mailbox | null;
  /** The caller's labels (metadata.ts); null or absent for none. */
  readonly metadata?: Metadata | null;
  /** The files, decoded (attachments.ts); null or absent for none. */
  readonly attachments?: readonly Attachment[] | null;
  /**
   * `data` as JSON, when the request was checked apart from its handler (a large body is parsed
   * and checked off the event loop, and only this text comes back); `data` is then not read.
   */
  readonly dataJson?: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * What makes a placeholder object unstorable: nesting deeper than MAX_PLACEHOLDER_DEPTH (it could
 * not even be serialized safely), a key or string that no store keeps as sent (storable-text.ts),
 * or a number past JSON's range, which JSON.parse reads as Infinity and the store would keep as
 * null. Walked without recursion, so no input can exhaust the stack.
 */
function placeholderProblem(value: object): string | null {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current === 'string') {
      const problem = unstorableText(current);
      if (problem !== null) return problem;
      continue;
    }
    if (typeof current === 'number' && !Number.isFinite(current))
      return 'contains a number past ±1.8e308, which JSON cannot keep';
    if (typeof current !== 'object' || current === null) continue;
    if (depth > MAX_PLACEHOLDER_DEPTH) return `nested deeper than ${MAX_PLACEHOLDER_DEPTH} levels`;
    for (const [key, child] of Object.entries(current)) {
      const problem = unstorableText(key);
      if (problem !== null) return problem;
      stack.push([child, depth + 1]);
    }
  }
  return null;
}

function placeholderObject(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw errors.invalidField(`Invalid '${field}' (must be a JSON object)`);
  const problem = placeholderProblem(value);
  if (problem !== null) throw errors.invalidField(`Invalid '${field}' (${problem})`);
  return value;
}

/** RFC 3339 date-time: a date, a time and a mandatory offset (`Z` or ±hh:mm). */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * The instant an RFC 3339 date-time names, or null for anything else: no offset, a day the month
 * does not have (which `Date.parse` would roll into the next month), an hour past 23.
 */
export function parseDateTime(text: string): number | null {
  const m = DATE_TIME.exec(text);
  if (m === null) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return null;
  // RFC 3339 allows a leap second (:60); it is read as the minute's last instant.
  if (hour > 23 || minute > 59 || second > 60) return null;
  const offsetHours = m[10] === undefined ? 0 : Number(m[10]);
  const offsetMinutes = m[11] === undefined ? 0 : Number(m[11]);
  if (offsetHours > 23 || offsetMinutes > 59) return null;
  const millis = second === 60 ? 999 : m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const offset = (m[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, Math.min(second, 59), millis);
  return utc.getTime() - offset;
}

/**
 * A date and time written almost as RFC 3339: a space for the T, no seconds, an offset without its
 * colon (`+0100`, as ISO 8601's basic format and `strftime('%z')` write it), or none.
 */
const NEARLY = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?((?:[Zz]|[+-]\d{2}:?\d{2})?)$/;

/** What to tell a caller whose `send_at` is not RFC 3339: the same time written so, when there is one. */
function sendAtHint(value: unknown): string {
  if (typeof value === 'string' && DATE_TIME.test(value))
    return 'No such date or time: a day the month does not have, or an hour, minute or offset out of range';
  const m = typeof value === 'string' ? NEARLY.exec(value) : null;
  const offset = m?.[4]?.replace(/^([+-]\d{2})(\d{2})$/, '$1:$2');
  const written = m && `${m[1]}T${m[2]}${m[3] ?? ':00'}${offset || 'Z'}`;
  if (m === null || written === null || parseDateTime(written) === null)
    return 'An RFC 3339 date and time with an offset, e.g. 2026-12-01T09:00:00+01:00';
  // A local time means a different instant in every zone: the offset is the caller's to choose.
  if (m[4] === '') return `The time has no offset: add Z for UTC or one like +01:00, e.g. ${written}`;
  return `An RFC 3339 date and time, e.g. ${written}`;
}

/** `send_at`: absent or null sends now; a time past sends now; more than 30 days ahead is refused. */
function parseSendAt(value: unknown, now: number): number | null {
  if (value === undefined || value === null) return null;
  const at = typeof value === 'string' && value.length <= 64 ? parseDateTime(value) : null;
  if (at === null) throw errors.invalidSendAt(sendAtHint(value));
  if (at > now + MAX_SCHEDULE_AHEAD_MS) throw errors.invalidSendAt('It is more than 30 days ahead');
  return at;
}

/** `locale`: absent or null asks for the default variant; otherwise a BCP 47 tag (product.md §11). */
function parseLocale(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const locale = canonicalLocale(value);
  if (locale === null) throw errors.invalidField("Invalid 'locale'", localeHint(value));
  return locale;
}

/** What to tell a caller whose `locale` is not a tag: the tag it meant, when `_` was its only fault. */
function localeHint(value: unknown): string {
  const hyphened = typeof value === 'string' ? canonicalLocale(value.replaceAll('_', '-')) : null;
  return hyphened !== null
    ? `BCP 47 tags are written with hyphens: ${hyphened}`
    : 'A BCP 47 tag of at most 35 characters, such as fr, fr-CA or zh-Hant-TW';
}

/** `reply_to`: absent, null or '' is none; otherwise one mailbox, as `to` is. */
function parseReplyTo(value: unknown): Mailbox | null {
  if (value === undefined || value === null || value === '') return null;
  const mailbox = typeof value === 'string' ? parseGivenMailbox(value) : null;
  if (mailbox === null)
    throw errors.invalidField("Invalid 'reply_to'", mailboxProblem(value, 'a message has one Reply-To'));
  return mailbox;
}

/** For a missing field sent under another case (`Template`): what to write instead, as a hint. */
function misspelledField(fields: Record<string, unknown>, name: string): string | undefined {
  const given = Object.keys(fields).find((key) => key !== name && key.toLowerCase() === name);
  return given === undefined
    ? undefined
    : `Field names are case-sensitive: '${given.slice(0, 100)}' is not '${name}'`;
}

/** Refuses the first field of the body Herald does not know (product.md §12). */
function refuseUnknownFields(fields: Record<string, unknown>): void {
  for (const name of Object.keys(fields))
    if (!KNOWN_FIELDS.has(name)) throw errors.invalidField(`Unknown field '${name.slice(0, 100)}'`);
}

/**
 * Checks a send request; `now` bounds how far ahead `send_at` may lie. A batch item may not carry
 * attachments (`attachments: false`).
 */
export function parseSendRequest(
  body: unknown,
  now: number = Date.now(),
  options: { readonly attachments?: boolean } = {},
): SendRequest {
  const fields = isPlainObject(body) ? body : {};

  const template = fields.template;
  if (
    typeof template !== 'string' ||
    template.trim() === '' ||
    template.length > MAX_TEMPLATE_NAME_LENGTH ||
    unstorableText(template) !== null
  ) {
    throw errors.invalidTemplate(template === undefined ? misspelledField(fields, 'template') : undefined);
  }

  if (fields.type !== undefined && fields.type !== 'email') throw errors.invalidType();

  // Absent (or null) falls back to the project's contact email; an empty string is a recipient
  // given and invalid, as a caller's blank address field is, never mail to the contact email.
  let to: Mailbox | null = null;
  if (fields.to !== undefined && fields.to !== null) {
    to = typeof fields.to === 'string' ? parseGivenMailbox(fields.to) : null;
    if (to === null) throw errors.invalidRecipient(mailboxProblem(fields.to));
  }

  refuseUnknownFields(fields);
  // Both objects may be sent: they are merged and `data` wins on a shared key.
  const variables = placeholderObject(fields.variables, 'variables');
  const data = placeholderObject(fields.data, 'data');
  const sendAt = parseSendAt(fields.send_at, now);
  const locale = parseLocale(fields.locale);
  const replyTo = parseReplyTo(fields.reply_to);
  const metadata = parseMetadata(fields.metadata);
  if (options.attachments === false && fields.attachments !== undefined && fields.attachments !== null)
    throw errors.invalidField(
      "Invalid 'attachments' (not allowed in a batch: send a message with files on its own)",
    );
  const attachments = parseAttachments(fields.attachments);
  return {
    template,
    to,
    data: { ...variables, ...data },
    type: 'email',
    sendAt,
    locale,
    replyTo,
    metadata,
    attachments,
  };
}

/** One refused item of a batch: its index and the error a single send of it would get. */
export interface BatchProblem {
  readonly index: number;
  readonly error: string;
}

export type BatchRequest =
  | { readonly ok: true; readonly sends: readonly SendRequest[] }
  | { readonly ok: false; readonly problems: readonly BatchProblem[] };

/**
 * Checks a batch (product.md §6): a JSON array of 1–`maxItems` sends, each checked as a single
 * send would be. `defaultRecipient` says whether a send without `to` has somewhere to go (the
 * project's contact email). Every refused item is reported, in order.
 */
export function parseBatchRequest(
  body: unknown,
  options: {
    readonly maxItems: number;
    readonly defaultRecipient: boolean;
    /** What one send may carry, as a single send's body limit would bound it. */
    readonly maxItemBytes: number;
    readonly tooLarge: string;
    readonly now?: number;
  },
): BatchRequest {
  if (!Array.isArray(body) || body.length === 0 || body.length > options.maxItems)
    throw errors.invalidField(`Body must be a JSON array of 1–${options.maxItems} notifications`);
  const now = options.now ?? Date.now();
  const sends: SendRequest[] = [];
  const problems: BatchProblem[] = [];
  body.forEach((item: unknown, index) => {
    try {
      const send = parseSendRequest(item, now, { attachments: false });
      if (send.to === null && !options.defaultRecipient) throw errors.noRecipient();
      // A batch must not carry a message larger than a single send could.
      if (jsonByteLength(item) > options.maxItemBytes) throw errors.invalidField(options.tooLarge);
      sends.push(send);
    } catch (error) {
      if (!(error instanceof HeraldError)) throw error;
      problems.push({ index, error: error.message });
    }
  });
  return problems.length === 0 ? { ok: true, sends } : { ok: false, problems };
}
