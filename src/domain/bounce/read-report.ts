import { classifyFailure, normalise } from './classify.js';
import { MAX_RECIPIENTS, type BounceRecipient, type FeedbackReport } from './feedback-report.js';
import { addressIn, get, headerFields, messageIdIn, type FieldBlock } from './fields.js';
import { header, type ParsedMessage } from './parsed-message.js';
import { storableText } from '../storable-text.js';
import { FEEDBACK_REPORT, readAppleUnsubscribe, readArf, readJmrp } from './read-complaint.js';
import { classifyDsnLine, clip, dsnLines, type DsnHint, type DsnLine } from './read-dsn.js';
import { readSesNotification } from './read-ses.js';
import { categoryBy, reportingSystemOf } from './reporting-systems.js';
import { descriptionLines, readTextRecipients, type TextRecipient } from './read-text.js';
import {
  hasBounceSubject,
  isAutoReply,
  isBounceSender,
  isDelayWarning,
  originalStart,
} from './text-formats.js';

/**
 * A message that came back to the bounce address → what it reports. Tried in this order, most
 * structured first: a complaint (ARF, Amazon SES, Microsoft JMRP, Apple unsubscribe), an RFC 3464
 * delivery-status part (with what the text part says of each recipient to fill its gaps), DSN
 * fields pasted into the text, then a prose bounce. An auto-reply, a delivery notice or anything
 * else is `unknown`. Pure: no I/O; never throws.
 */

/** RFC 3464 §2.1 and its UTF-8 form from RFC 6533. */
const DELIVERY_STATUS = new Set(['message/delivery-status', 'message/global-delivery-status']);
/** The returned message or its header section (RFC 6522), and their UTF-8 forms (RFC 6533). */
const ORIGINAL = new Set([
  'message/rfc822',
  'text/rfc822-headers',
  'message/global',
  'message/global-headers',
]);

export function readReport(message: ParsedMessage): FeedbackReport {
  try {
    return storable(read(storableMessage(message)));
  } catch {
    return { kind: 'unknown' };
  }
}

/**
 * The message as a store keeps text (storable-text.ts), so that what is read of it and what is
 * stored are the same words: its words come from anyone who can send mail.
 */
function storableMessage(message: ParsedMessage): ParsedMessage {
  return {
    headers: message.headers.map((field) => ({ ...field, value: storableText(field.value) })),
    contentType: message.contentType,
    text: storableText(message.text),
    parts: message.parts.map((part) => ({
      ...part,
      text: storableText(part.text),
      ...(part.message !== undefined && { message: storableMessage(part.message) }),
    })),
  };
}

/**
 * The report with every field as a store keeps it: what a format decodes itself (an SES
 * notification's JSON) may hold what the message's text did not, and a NUL in a returned
 * Message-ID must not make the report unreadable.
 */
function storable(report: FeedbackReport): FeedbackReport {
  const text = (value: string | null) => (value === null ? null : storableText(value));
  switch (report.kind) {
    case 'unknown':
      return report;
    case 'complaint':
      return {
        ...report,
        feedbackType: storableText(report.feedbackType),
        recipient: text(report.recipient),
        originalMessageId: text(report.originalMessageId),
      };
    case 'bounce':
      return {
        ...report,
        recipients: report.recipients.map((line) => ({
          ...line,
          recipient: text(line.recipient),
          action: text(line.action),
          status: text(line.status),
          diagnostic: text(line.diagnostic),
        })),
        originalMessageId: text(report.originalMessageId),
      };
  }
}

function read(message: ParsedMessage): FeedbackReport {
  const originalPart = message.parts.find((part) => ORIGINAL.has(part.contentType))?.text ?? null;
  const feedback = message.parts.find((part) => part.contentType === FEEDBACK_REPORT);
  if (feedback) return readArf(feedback.text, originalPart);
  const complaint =
    readSesNotification(message.text) ?? readJmrp(originalPart) ?? readAppleUnsubscribe(message);
  if (complaint) return complaint;

  const original = headerFields(originalPart ?? inlineOriginal(message.text));
  const originalMessageId = messageIdIn(original);
  const excluded = excludedAddresses(message, original);
  const subject = header(message, 'subject') ?? '';
  const description = descriptionLines(message.text).join('\n');
  const permanent = !isDelayWarning(subject, description);
  // A notice of a system that says things its own way: its words decide the category.
  const system = reportingSystemOf(message);
  const noticeText = system === null ? '' : normalise(description);
  const categoryOf = (text: string) => categoryBy(system, normalise(text), noticeText);

  const statuses = message.parts.filter((part) => DELIVERY_STATUS.has(part.contentType));
  let lines = statuses.flatMap((part) => dsnLines(part.text));
  // Amazon WorkMail and forwarded reports paste the DSN fields into the text.
  if (lines.length === 0 && /^>? ?final-recipient\s*:/im.test(message.text))
    lines = dsnLines(message.text.replace(/^> ?/gm, '')).filter((line) => line.recipient !== null);
  if (lines.length > 0) {
    const hints = readTextRecipients(message.text, { excluded, permanent });
    const recipients = lines.map((line) => {
      const hint = hintFor(line, lines.length, hints);
      const vendorCategory = line.vendorCategory ?? categoryOf(line.diagnostic ?? hint?.diagnostic ?? '');
      const read = classifyDsnLine({ ...line, vendorCategory }, hint);
      // A Final-Recipient that is no address (sendmail writes "@host" when it lost the local part):
      // the text names the recipient when it names only one.
      const named = hints.length === 1 && lines.length === 1 ? hints[0]!.recipient : null;
      return named !== null && !isAddress(read.recipient) ? { ...read, recipient: named } : read;
    });
    return { kind: 'bounce', recipients: recipients.slice(0, MAX_RECIPIENTS), originalMessageId };
  }

  // A notice that only wraps another report (a bounce forwarded, or bounced itself): read the inner one.
  const inner = message.parts.find((part) => part.message !== undefined)?.message;
  const innerReport = inner === undefined || !isBounceSender(message) ? null : read(inner);
  if (!looksLikeBounce(message)) return { kind: 'unknown' };
  const exim = eximShape(message, description);
  if (exim === 'broken') return { kind: 'unknown' };
  const found = readTextRecipients(message.text, { excluded, permanent, categoryOf });
  const named = found.some((line) => line.recipient !== null);
  if (!named && innerReport !== null && innerReport.kind !== 'unknown') return innerReport;
  const fallback = fallbackRecipient(message, original);
  const recipients = found.map((line) =>
    proseRecipient(line.recipient === null ? { ...line, recipient: fallback } : line, permanent),
  );
  // A bounce that names nobody and says nothing a rule can read is no report at all.
  if (
    recipients.every(
      ({ recipient, category, status, replyCode }) =>
        recipient === null && category === 'other' && status === null && replyCode === null,
    )
  )
    return { kind: 'unknown' };
  if (exim === 'exim' && !EXIM_PERMANENT.test(description) && permanent)
    return {
      kind: 'bounce',
      recipients: recipients.map((line) => ({ ...line, action: null })),
      originalMessageId,
    };
  return { kind: 'bounce', recipients, originalMessageId };
}

/** Exim's bounce: its first line, and the marks only Exim leaves (its header, its copy line). */
const EXIM_SIGNATURE = /this message was created automatically by mail delivery software/i;
const EXIM_COPY = /^-+ this is a copy of the message, including all the headers/im;
/**
 * Exim says its failure is final in one of two ways (deliver.c): to the sender, "This is a
 * permanent error."; to another address (errors_to), "A message sent by <sender> could not be
 * delivered to one or more of its recipients", with no such sentence.
 */
const EXIM_PERMANENT = /this is a permanent error|a message sent by\s+<[^<>\n]*>\s+could not be delivered/i;

/**
 * Exim's bounce has a fixed shape: from Mailer-Daemon, text/plain, "could not be delivered to one
 * or more of its recipients" (or "to all of"), then "The following address(es) failed:" and each
 * address indented two spaces, its details four; its delay warning says "has not yet been
 * delivered". Other software (GMX, Zoho, MXLogic) borrows the first line only, and is read as
 * prose. A message with Exim's marks and not its shape is not one of its bounces: 'broken'.
 */
function eximShape(message: ParsedMessage, description: string): 'exim' | 'broken' | 'other' {
  const marked = header(message, 'x-failed-recipients') !== null || EXIM_COPY.test(message.text);
  if (!EXIM_SIGNATURE.test(description) || !marked) return 'other';
  const flat = description.replace(/\s+/g, ' ');
  const warning = /has not yet been delivered/i.test(flat);
  const failed =
    /could not be delivered to (?:one or more of|all of) its recipients/i.test(flat) &&
    /following address(?:\(es\))? failed:/i.test(flat);
  const listed = /^ {2}\S/m.test(description);
  const shaped =
    isBounceSender(message) && message.contentType === 'text/plain' && (failed || warning) && listed;
  return shaped ? 'exim' : 'broken';
}

/**
 * A prose bounce: a bounce sender (MAILER-DAEMON, postmaster, …), a bounce subject, a
 * multipart/report, or Exim's X-Failed-Recipients. An auto-reply from a person is none of them.
 */
function looksLikeBounce(message: ParsedMessage): boolean {
  const sender = isBounceSender(message);
  // A person forwarding a bounce ("Fwd: Undelivered Mail …") is not reporting one.
  const subject = hasBounceSubject(message) && !/^\s*(?:fwd?|fw)\s*:/i.test(header(message, 'subject') ?? '');
  if (isAutoReply(message) && !sender && !subject) return false;
  return (
    sender ||
    subject ||
    message.contentType === 'multipart/report' ||
    header(message, 'x-failed-recipients') !== null ||
    (returnsOriginal(message) && FAILURE_SENTENCE.test(descriptionLines(message.text).join(' ')))
  );
}

/** What every bounce says in some form, whoever sends it (KDDI's come from no-reply@, titled "Mail"). */
const FAILURE_SENTENCE =
  /could not be delivered|was not delivered|undeliverable|delivery (?:has )?failed|unable to deliver|failed to deliver|could not deliver/i;

function returnsOriginal(message: ParsedMessage): boolean {
  return message.parts.some((part) => ORIGINAL.has(part.contentType));
}

function proseRecipient(line: TextRecipient, permanent: boolean): BounceRecipient {
  const { verdict } = line;
  return {
    recipient: line.recipient,
    action: permanent ? 'failed' : 'delayed',
    status: verdict.status,
    diagnostic: clip(line.diagnostic),
    category: verdict.category,
    type: verdict.type,
    replyCode: verdict.replyCode,
  };
}

/** What the text part says of the DSN line's recipient; with one line each, they are the same one. */
function isAddress(value: string | null): boolean {
  return value !== null && /^[^@\s]+@[^@\s]+$/.test(value);
}

function hintFor(line: DsnLine, count: number, hints: readonly TextRecipient[]): DsnHint | null {
  const address = line.recipient?.toLowerCase();
  const hint =
    hints.find((candidate) => candidate.recipient?.toLowerCase() === address) ??
    (count === 1 && hints.length === 1 ? hints[0] : undefined);
  if (hint === undefined) return null;
  // A text that only repeats the generic preamble gives no diagnostic worth keeping.
  const says = classifyFailure({ diagnostic: hint.diagnostic });
  const useful = says.category !== 'other' || says.status !== null || says.replyCode !== null;
  return { diagnostic: useful ? hint.diagnostic : null, command: hint.command };
}

/** The returned message's header section when it is pasted into the text after a marker. */
function inlineOriginal(text: string): string {
  const lines = text.split(/\r\n|\r|\n/, 4000);
  const start = originalStart(lines);
  return lines
    .slice(start + (/^[\w-]+: /.test(lines[start] ?? '') ? 0 : 1))
    .map((line) => line.replace(/^> ?/, ''))
    .join('\n');
}

/** Addresses in a bounce that are not recipients: its own sender and recipient, and the original's sender. */
function excludedAddresses(message: ParsedMessage, original: FieldBlock): Set<string> {
  const own = ['from', 'to', 'delivered-to', 'x-original-to', 'return-path'].map((name) =>
    addressIn(header(message, name)),
  );
  const sender = ['from', 'sender', 'return-path', 'reply-to', 'errors-to'].map((name) =>
    addressIn(get(original, name)),
  );
  return new Set([...own, ...sender].flatMap((address) => (address === null ? [] : [address.toLowerCase()])));
}

/** Who a prose bounce that names nobody is about: Exim's X-Failed-Recipients, or the original's only To. */
function fallbackRecipient(message: ParsedMessage, original: FieldBlock): string | null {
  const failed = addressIn(header(message, 'x-failed-recipients'));
  if (failed !== null) return failed;
  const to = get(original, 'to');
  return to !== null && !to.includes(',') ? addressIn(to) : null;
}
