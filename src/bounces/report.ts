import { readReport } from '../domain/bounce/read-report.js';
import type { FeedbackReport } from '../domain/bounce/feedback-report.js';
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

/** Never throws (any bytes, any size; what is past the listener's limit is not read). */
export async function parseReport(raw: Buffer): Promise<FeedbackReport> {
  try {
    return readReport(await parseMessage(raw));
  } catch {
    return { kind: 'unknown' };
  }
}
