import { readReport } from '../domain/bounce/read-report.js';
import type { FeedbackReport } from '../domain/bounce/feedback-report.js';
import type { ParsedMessage } from '../domain/bounce/parsed-message.js';
import { parseMessage } from './parse.js';

/**
 * Reads what comes back to the bounce address: the bytes are parsed into plain data (parse.ts, the
 * only user of mailparser here), then read by the pure domain reader (src/domain/bounce/), which
 * knows RFC 3464 reports, ARF complaints and the prose bounces of the common MTAs and providers.
 * The result is facts and their classification; what to do with them is decided by the caller.
 */

export type { BounceRecipient, FeedbackReport } from '../domain/bounce/feedback-report.js';
export { bounceSeverity } from '../domain/bounce/feedback-report.js';
export { parseDeliveryStatus } from '../domain/bounce/read-dsn.js';

/** A report as read, with the addresses it was delivered to (for a mailbox: where the token is). */
export interface ReadReport {
  readonly report: FeedbackReport;
  /**
   * The addresses in the top-level fields a receiving server records the envelope recipient in
   * (Delivered-To, X-Original-To, Envelope-To, …) and in To, in that order, at most MAX_ADDRESSES.
   */
  readonly deliveredTo: readonly string[];
}

/** Fields that name the envelope recipient, in the order they are trusted, To last. */
const DELIVERY_FIELDS = [
  'delivered-to',
  'x-original-to',
  'x-delivered-to',
  'envelope-to',
  'x-envelope-to',
  'x-rcpt-to',
  'to',
];
const MAX_ADDRESSES = 20;
const ADDRESS = /[^\s<>,;:"()[\]\\]{1,64}@[^\s<>,;:"()[\]\\]{1,255}/g;

function deliveredTo(message: ParsedMessage): string[] {
  const found: string[] = [];
  for (const name of DELIVERY_FIELDS)
    for (const field of message.headers)
      if (field.name === name)
        for (const match of field.value.slice(0, 2000).matchAll(ADDRESS))
          if (found.length < MAX_ADDRESSES) found.push(match[0]);
  return found;
}

/** Never throws (any bytes, any size; what is past the listener's limit is not read). */
export async function parseReport(raw: Buffer): Promise<FeedbackReport> {
  return (await readIncoming(raw)).report;
}

/** The report and where it was delivered; never throws. */
export async function readIncoming(raw: Buffer): Promise<ReadReport> {
  try {
    const message = await parseMessage(raw);
    return { report: readReport(message), deliveredTo: deliveredTo(message) };
  } catch {
    return { report: { kind: 'unknown' }, deliveredTo: [] };
  }
}
