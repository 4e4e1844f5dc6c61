import type { FeedbackReport } from './feedback-report.js';
import { addressIn, fieldBlocks, get, headerFields, messageIdIn, typedValue, unbracket } from './fields.js';
import { header, type ParsedMessage } from './parsed-message.js';

/**
 * Complaints: RFC 5965 (ARF) feedback reports, Microsoft's Junk Mail Reporting Program (Outlook.com
 * and Hotmail return the reported message with its original recipient in a header, without an ARF
 * part), and Apple Mail's unsubscribe requests, which a notification sender must honour like an
 * opt-out report (RFC 5965 §7.3 registers "opt-out").
 */

/** RFC 5965 §3. */
export const FEEDBACK_REPORT = 'message/feedback-report';

export function readArf(report: string, original: string | null): FeedbackReport {
  const [fields = []] = fieldBlocks(report);
  // RFC 5965 §3.1: Feedback-Type is required; a report without it is not one.
  const feedbackType = get(fields, 'feedback-type')?.toLowerCase();
  if (!feedbackType) return { kind: 'unknown' };
  const rcptTo = typedValue(get(fields, 'original-rcpt-to'));
  const originalFields = original === null ? [] : headerFields(original);
  return {
    kind: 'complaint',
    feedbackType: feedbackType.slice(0, 100),
    recipient: rcptTo !== null ? unbracket(rcptTo) : addressIn(get(originalFields, 'to')),
    originalMessageId: messageIdIn(originalFields),
  };
}

/** Microsoft JMRP: the reported message, returned whole, carries X-HmXmrOriginalRecipient. */
export function readJmrp(original: string | null): FeedbackReport | null {
  if (original === null) return null;
  const fields = headerFields(original);
  const recipient = addressIn(get(fields, 'x-hmxmroriginalrecipient'));
  if (recipient === null) return null;
  return { kind: 'complaint', feedbackType: 'abuse', recipient, originalMessageId: messageIdIn(fields) };
}

/** Apple Mail's "unsubscribe" message, sent to a List-Unsubscribe mailto: address. */
export function readAppleUnsubscribe(message: ParsedMessage): FeedbackReport | null {
  if ((header(message, 'x-apple-unsubscribe') ?? '').trim().toLowerCase() !== 'true') return null;
  const inReplyTo = header(message, 'in-reply-to');
  return {
    kind: 'complaint',
    feedbackType: 'opt-out',
    recipient: addressIn(header(message, 'from')),
    originalMessageId: inReplyTo === null ? null : messageIdIn([{ name: 'message-id', value: inReplyTo }]),
  };
}
