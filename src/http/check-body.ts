import { isUtf8 } from 'node:buffer';
import { bodyFingerprint, jsonByteLength } from '../domain/canonical-json.js';
import { HeraldError, PROTOTYPE_KEY_HINT, type ErrorCode } from '../domain/errors.js';
import {
  parseBatchRequest,
  parseSendRequest,
  type BatchProblem,
  type SendRequest,
} from '../domain/send-request.js';

/**
 * Everything the API does with a request body before it is accepted: JSON parsing (with the
 * prototype-poisoning refusals of Fastify's own parser), the send or batch checks, and the
 * Idempotency-Key fingerprint. A pure function of its job, run on the event loop for small bodies
 * and in a worker thread for large ones (body-checker.ts): only its small result crosses over.
 */
export type BodyRequest =
  | { readonly kind: 'json' }
  | {
      readonly kind: 'send' | 'batch';
      readonly now: number;
      /** Whether a send without `to` has somewhere to go (the project's contact email). */
      readonly defaultRecipient: boolean;
      /** Whether an Idempotency-Key came with it, so its fingerprint is needed. */
      readonly fingerprint: boolean;
      readonly maxItems: number;
      readonly maxItemBytes: number;
      readonly tooLarge: string;
      /**
       * What a single send may carry beside its files' content (product.md §12): a larger body is
       * refused as too large (`kind: 'too_large'`) unless its files make up the difference.
       */
      readonly maxBytesBesideFiles: number;
    };

/**
 * A checked send as it crosses back: its data already JSON (`data` is left empty, so the values
 * cross once, as text), its files' bytes each in an ArrayBuffer of their own (moved from a worker
 * thread, not copied: see `transferables`).
 */
export type CheckedSend = SendRequest & { readonly dataJson: string };

export type BodyResult =
  | { readonly kind: 'invalid_json'; readonly hint?: string }
  /** A single send larger than `maxBytesBesideFiles` once its files' content is left out. */
  | { readonly kind: 'too_large' }
  /** A refusal of the whole body (a HeraldError, rebuilt from its code and message). */
  | {
      readonly kind: 'refused';
      readonly code: ErrorCode;
      readonly message: string;
      readonly hint: string | undefined;
    }
  | { readonly kind: 'problems'; readonly items: number; readonly problems: readonly BatchProblem[] }
  | {
      readonly kind: 'ok';
      readonly items: number;
      readonly sends: readonly CheckedSend[];
      readonly fingerprint: string | null;
    };

/** Quick tests for the keys Fastify's parser refuses; the parsed value is walked only if they match. */
const PROTO =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"/;
const CONSTRUCTOR =
  /"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"/;

/** An own `__proto__` key, or a `constructor` object with a `prototype` key, anywhere (no recursion). */
function poisoned(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current !== 'object' || current === null) continue;
    if (Object.prototype.hasOwnProperty.call(current, '__proto__')) return true;
    const ctor = (current as Record<string, unknown>).constructor;
    if (
      Object.prototype.hasOwnProperty.call(current, 'constructor') &&
      typeof ctor === 'object' &&
      ctor !== null &&
      Object.prototype.hasOwnProperty.call(ctor, 'prototype')
    )
      return true;
    for (const child of Object.values(current)) stack.push(child);
  }
  return false;
}

/**
 * JSON as JSON.parse reads it, refusing keys that could pollute prototypes (as Fastify's own
 * parser does): the value, or for a refusal the hint to answer it with, if any.
 */
export function parseJson(text: string): { value: unknown } | { hint?: string } {
  let value: unknown;
  try {
    // A byte order mark before the JSON, as some Windows tools write, is not part of it (RFC 8259
    // §8.1 lets a parser ignore one).
    value = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    return {};
  }
  if ((PROTO.test(text) || CONSTRUCTOR.test(text)) && poisoned(value)) return { hint: PROTOTYPE_KEY_HINT };
  return { value };
}

/** A file's bytes in a buffer of their own, so they can move to another thread without a copy. */
function ownBuffer(bytes: Uint8Array): Uint8Array {
  const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return own && bytes.buffer instanceof ArrayBuffer ? bytes : new Uint8Array(bytes);
}

/**
 * A send as it crosses back from a worker thread: every field kept, its data as JSON text. One
 * literal with every field named: a rest-and-spread copy of the send cost more than its checks.
 */
function checked(send: SendRequest): CheckedSend {
  // Every field named, optional ones too, so a field added to SendRequest cannot be left behind.
  const fields: { [Field in keyof CheckedSend]-?: CheckedSend[Field] } = {
    template: send.template,
    to: send.to,
    type: send.type,
    sendAt: send.sendAt,
    locale: send.locale ?? null,
    replyTo: send.replyTo ?? null,
    metadata: send.metadata ?? null,
    attachments: send.attachments?.map((file) => ({ ...file, content: ownBuffer(file.content) })) ?? null,
    data: {},
    dataJson: JSON.stringify(send.data),
  };
  return fields;
}

/** The buffers of a result that move to the receiving thread instead of being copied. */
export function transferables(result: BodyResult): ArrayBuffer[] {
  if (result.kind !== 'ok') return [];
  return result.sends.flatMap(
    (send) => send.attachments?.map((file) => file.content.buffer as ArrayBuffer) ?? [],
  );
}

/** The body as JSON with its files' content left out: what must fit a single send's limit. */
function bytesBesideFiles(body: unknown): number {
  if (
    typeof body !== 'object' ||
    body === null ||
    !Array.isArray((body as Record<string, unknown>).attachments)
  )
    return jsonByteLength(body);
  const files = (body as { attachments: unknown[] }).attachments;
  return jsonByteLength({
    ...body,
    attachments: files.map((file) =>
      typeof file === 'object' && file !== null && !Array.isArray(file) ? { ...file, content: '' } : file,
    ),
  });
}

/** The hint of a body refused as `Invalid JSON body` because its bytes are not UTF-8. */
export const NOT_UTF8_HINT =
  'The body is not valid UTF-8, which JSON must be (RFC 8259 §8.1): send its text encoded as UTF-8';

/**
 * A body's text, or null when its bytes are not UTF-8: decoded anyway, each bad byte would become
 * U+FFFD and reach a recipient as `�` in place of what the caller meant.
 */
export function bodyText(bytes: Uint8Array): string | null {
  return isUtf8(bytes)
    ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
    : null;
}

/** Checks a request's body, its bytes as they came, as `job` says. */
export function checkBodyBytes(job: BodyRequest, bytes: Uint8Array): BodyResult {
  const text = bodyText(bytes);
  return text === null ? { kind: 'invalid_json', hint: NOT_UTF8_HINT } : checkBody(job, text);
}

/** Checks a request's body (`text`) as `job` says. */
function checkBody(job: BodyRequest, text: string): BodyResult {
  // A single send past its limit must carry files, or it is too large before it is even parsed.
  const large = job.kind === 'send' && Buffer.byteLength(text) > job.maxBytesBesideFiles;
  if (large && !text.includes('"attachments"')) return { kind: 'too_large' };
  const parsed = parseJson(text);
  if (!('value' in parsed)) return { kind: 'invalid_json', ...parsed };
  if (job.kind === 'json') return { kind: 'ok', items: 0, sends: [], fingerprint: null };
  const body = parsed.value;
  if (large && bytesBesideFiles(body) > job.maxBytesBesideFiles) return { kind: 'too_large' };
  try {
    let sends: readonly SendRequest[];
    if (job.kind === 'send') sends = [parseSendRequest(body, job.now)];
    else {
      const batch = parseBatchRequest(body, job);
      if (!batch.ok) return { kind: 'problems', items: (body as unknown[]).length, problems: batch.problems };
      sends = batch.sends;
    }
    return {
      kind: 'ok',
      items: sends.length,
      sends: sends.map(checked),
      fingerprint: job.fingerprint ? bodyFingerprint(body) : null,
    };
  } catch (error) {
    if (error instanceof HeraldError)
      return { kind: 'refused', code: error.code, message: error.message, hint: error.hint };
    throw error;
  }
}
