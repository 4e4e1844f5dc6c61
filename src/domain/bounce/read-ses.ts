import { classifyDsnLine } from './read-dsn.js';
import { MAX_RECIPIENTS, type FeedbackReport } from './feedback-report.js';
import { typedValue, valueType } from './fields.js';
import { enhancedStatusIn } from './status-codes.js';

/**
 * Amazon SES event notifications delivered by e-mail (an SNS subscription): a JSON body, bare or
 * inside SNS's envelope as the string `Message`. Bounce → bounce, Complaint → complaint; Delivery
 * and the rest are no report.
 */

/** The notification must fit in the text part; SES's own are a few KiB. */
const MAX_JSON = 256 * 1024;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function parseJson(text: string): Json | undefined {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
}

function objectAt(value: Json | undefined, key: string): { [key: string]: Json } | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const inner = value[key];
  return inner !== null && typeof inner === 'object' && !Array.isArray(inner) ? inner : null;
}

function stringAt(value: Json | undefined, key: string): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value === undefined) return null;
  const inner = value[key];
  return typeof inner === 'string' ? inner : null;
}

function arrayAt(value: Json | undefined, key: string): Json[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value === undefined) return [];
  const inner = value[key];
  return Array.isArray(inner) ? inner.slice(0, MAX_RECIPIENTS) : [];
}

/** The SES notification in a text body, or null when the body is not one. */
function notificationIn(text: string): Json | undefined {
  if (!text.includes('notificationType')) return undefined;
  // sendmail breaks lines longer than its limit with "!" and a continuation line.
  const unwrapped = text.slice(0, MAX_JSON).replace(/!\r?\n /g, '');
  const start = unwrapped.indexOf('{');
  const end = unwrapped.lastIndexOf('}');
  if (start < 0 || end <= start) return undefined;
  const outer = parseJson(unwrapped.slice(start, end + 1));
  const message = stringAt(outer, 'Message');
  return message === null ? outer : parseJson(message);
}

export function readSesNotification(text: string): FeedbackReport | null {
  const notification = notificationIn(text);
  const type = stringAt(notification, 'notificationType') ?? stringAt(notification, 'eventType');
  if (type === null) return null;
  const mail = objectAt(notification, 'mail');
  const originalMessageId = stringAt(objectAt(mail, 'commonHeaders'), 'messageId') ?? null;
  if (type === 'Complaint') {
    const complaint = objectAt(notification, 'complaint');
    const recipient = arrayAt(complaint, 'complainedRecipients')
      .map((entry) => stringAt(entry, 'emailAddress'))
      .find((address) => address !== null);
    return {
      kind: 'complaint',
      feedbackType: (stringAt(complaint, 'complaintFeedbackType') ?? 'abuse').toLowerCase().slice(0, 100),
      recipient: recipient ?? null,
      originalMessageId,
    };
  }
  if (type !== 'Bounce') return { kind: 'unknown' };
  const bounce = objectAt(notification, 'bounce');
  // bounceType Transient: SES will not retry, but the cause is temporary (mailbox full, …).
  const recipients = arrayAt(bounce, 'bouncedRecipients').map((entry) => {
    const diagnosticCode = stringAt(entry, 'diagnosticCode');
    return classifyDsnLine({
      recipient: stringAt(entry, 'emailAddress'),
      action: (stringAt(entry, 'action') ?? 'failed').toLowerCase(),
      status: enhancedStatusIn(stringAt(entry, 'status') ?? ''),
      diagnostic: typedValue(diagnosticCode),
      diagnosticType: valueType(diagnosticCode),
    });
  });
  return recipients.length === 0 ? { kind: 'unknown' } : { kind: 'bounce', recipients, originalMessageId };
}
