import type { Field } from './fields.js';

/**
 * A message as the bounce readers see it: plain data only (strings and arrays), so it can be
 * built anywhere (a worker thread, a test) and passed by structured clone. The adapter
 * (src/bounces/parse.ts) fills it from the raw bytes and bounds every part of it.
 */
export interface ParsedMessage {
  /** The top-level header fields in order, names lowercased, values unfolded; Subject decoded (RFC 2047). */
  readonly headers: readonly Field[];
  /** The top-level media type, lowercased, without parameters ('text/plain' when absent, RFC 2045 §5.2). */
  readonly contentType: string;
  /** The readable body: the inline text parts decoded and joined; an HTML-only body as text. */
  readonly text: string;
  /** Every other part, in order: delivery-status, feedback-report, the returned message or its headers, … */
  readonly parts: readonly MessagePart[];
}

export interface MessagePart {
  /** Media type, lowercased, without parameters. */
  readonly contentType: string;
  /** The part's content decoded (transfer encoding and charset); a returned message as its text. */
  readonly text: string;
  /**
   * A returned message that is itself a report (a bounce of a bounce, or a report forwarded as an
   * attachment), parsed one level deep.
   */
  readonly message?: ParsedMessage;
}

export function header(message: ParsedMessage, name: string): string | null {
  return message.headers.find((field) => field.name === name)?.value ?? null;
}
