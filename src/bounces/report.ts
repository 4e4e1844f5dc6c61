import { enhancedStatusIn } from '../domain/suppression.js';
import { simpleParser, type Attachment, type ParsedMail, type SimpleParserOptions } from 'mailparser';

/**
 * Reads what comes back to the bounce address: RFC 3464 delivery status notifications, RFC 5965
 * (ARF) complaints, and Exim's classic plain-text bounce. The result is facts only; what to do
 * with them (fail the message, suppress the address) is decided by the caller.
 */

export interface BounceRecipient {
  /** Final-Recipient (or Original-Recipient) address without the `rfc822;` type, lowercased domain not required; null when absent. */
  readonly recipient: string | null;
  /** Action field lowercased: 'failed' | 'delayed' | 'delivered' | 'relayed' | 'expanded', or null. */
  readonly action: string | null;
  /** Enhanced status code like '5.1.1' (from the Status field, or failing that found in the diagnostic), or null. */
  readonly status: string | null;
  /** Diagnostic-Code without its `smtp;` type, unfolded, trimmed, at most 500 characters; null when absent. */
  readonly diagnostic: string | null;
}

export type FeedbackReport =
  | {
      readonly kind: 'bounce';
      readonly recipients: readonly BounceRecipient[];
      readonly originalMessageId: string | null;
    }
  | {
      readonly kind: 'complaint';
      readonly feedbackType: string;
      readonly recipient: string | null;
      readonly originalMessageId: string | null;
    }
  | { readonly kind: 'unknown' };

interface Field {
  readonly name: string;
  readonly value: string;
}
type FieldBlock = readonly Field[];

const MAX_DIAGNOSTIC = 500;
/** More recipients than this in one report is not a bounce of a one-recipient notification. */
const MAX_RECIPIENTS = 100;
/** Exim writes a handful of lines about each address; a long tail is not its format. */
const MAX_DETAIL_LINES = 20;
/** RFC 5322 §2.1.1: a line is at most 998 characters; a folded field may span several. */
const MAX_FIELD_VALUE = 4 * 998;
/** RFC 3464 §2.3.3. */
const ACTIONS = new Set(['failed', 'delayed', 'delivered', 'relayed', 'expanded']);
/** RFC 3464 §2.1 and its UTF-8 form from RFC 6533. */
const DELIVERY_STATUS = new Set(['message/delivery-status', 'message/global-delivery-status']);
/** RFC 5965 §3. */
const FEEDBACK_REPORT = 'message/feedback-report';
/** The returned message or its header section (RFC 6522), and their UTF-8 forms (RFC 6533). */
const ORIGINAL = new Set([
  'message/rfc822',
  'text/rfc822-headers',
  'message/global',
  'message/global-headers',
]);
/** RFC 5322 §3.6.8: field-name is printable ASCII except the colon. */
const FIELD = /^([!-9;-~]+)[ \t]*:(.*)$/s;
const PARSER_OPTIONS: SimpleParserOptions & { ignoreEmbedded: boolean } = {
  // Delivery-status parts otherwise vanish into `text` instead of `attachments`.
  keepDeliveryStatus: true,
  // An inline message/rfc822 part would otherwise be parsed into the report itself: its text
  // merged into `text`, its own attachments listed as the report's, and its headers lost.
  ignoreEmbedded: true,
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipTextLinks: true,
  keepCidLinks: true,
};

/** Never throws (any bytes, any size up to the listener's limit; parser errors give {kind:'unknown'}). */
export async function parseReport(raw: Buffer): Promise<FeedbackReport> {
  let mail: ParsedMail;
  try {
    mail = await simpleParser(raw, PARSER_OPTIONS);
  } catch {
    return { kind: 'unknown' };
  }
  try {
    return classify(mail);
  } catch {
    return { kind: 'unknown' };
  }
}

function classify(mail: ParsedMail): FeedbackReport {
  const parts = mail.attachments;
  const feedback = parts.find((part) => part.contentType === FEEDBACK_REPORT);
  if (feedback) return complaint(feedback, originalHeaders(parts));
  const statuses = parts.filter((part) => DELIVERY_STATUS.has(part.contentType));
  if (statuses.length > 0) {
    const recipients = statuses.flatMap((part) => parseDeliveryStatus(partText(part)).recipients);
    const original = originalHeaders(parts);
    return {
      kind: 'bounce',
      recipients: recipients.slice(0, MAX_RECIPIENTS),
      originalMessageId: original === null ? null : messageIdIn(original),
    };
  }
  return eximBounce(mail) ?? { kind: 'unknown' };
}

/** The pure part: an RFC 3464 delivery-status body → recipients. Never throws. */
export function parseDeliveryStatus(text: string): { readonly recipients: readonly BounceRecipient[] } {
  if (typeof text !== 'string') return { recipients: [] };
  // RFC 3464 §2.1: a per-message block, then one block per recipient. Blocks are told apart by
  // their fields rather than their position, so a missing or extra blank line loses nothing.
  const recipients = fieldBlocks(text)
    .filter((block) => ['final-recipient', 'original-recipient', 'action'].some((name) => has(block, name)))
    .slice(0, MAX_RECIPIENTS)
    .map(recipientOf);
  return { recipients };
}

function recipientOf(block: FieldBlock): BounceRecipient {
  const address = typedValue(get(block, 'final-recipient')) ?? typedValue(get(block, 'original-recipient'));
  const diagnostic = clip(typedValue(get(block, 'diagnostic-code')));
  const action =
    get(block, 'action')
      ?.toLowerCase()
      .split(/[\s(;]/, 1)[0] ?? '';
  return {
    recipient: address === null ? null : unbracket(address),
    action: ACTIONS.has(action) ? action : null,
    status: enhancedStatusIn(get(block, 'status') ?? '') ?? (diagnostic && enhancedStatusIn(diagnostic)),
    diagnostic,
  };
}

/**
 * 'hard' = permanent (Action failed, or no Action and status 5.x.x), 'soft' = transient (Action
 * delayed, or no Action and 4.x.x), null = not a failure. Action decides when present: RFC 3464
 * §2.3.3 makes it required, and an MTA that gives up after retrying reports `failed` with a 4.x.x
 * status (the message is lost, though the mailbox may be fine).
 */
export function bounceSeverity(recipient: BounceRecipient): 'hard' | 'soft' | null {
  switch (recipient.action) {
    case 'failed':
      return 'hard';
    case 'delayed':
      return 'soft';
    case null:
      break;
    default:
      return null;
  }
  const statusClass = recipient.status?.[0];
  return statusClass === '5' ? 'hard' : statusClass === '4' ? 'soft' : null;
}

function complaint(part: Attachment, original: string | null): FeedbackReport {
  const [fields = []] = fieldBlocks(partText(part));
  // RFC 5965 §3.1: Feedback-Type is required; a report without it is not one.
  const feedbackType = get(fields, 'feedback-type')?.toLowerCase();
  if (!feedbackType) return { kind: 'unknown' };
  const rcptTo = typedValue(get(fields, 'original-rcpt-to'));
  const originalFields = original === null ? [] : headerFields(original);
  return {
    kind: 'complaint',
    feedbackType,
    recipient: rcptTo !== null ? unbracket(rcptTo) : addressIn(get(originalFields, 'to')),
    originalMessageId: original === null ? null : messageIdIn(original),
  };
}

/** The returned message or its header section, or null when none was returned (RFC 3461 §4.3, RET). */
function originalHeaders(parts: readonly Attachment[]): string | null {
  const part = parts.find((candidate) => ORIGINAL.has(candidate.contentType));
  return part ? partText(part) : null;
}

function messageIdIn(headers: string): string | null {
  const value = get(headerFields(headers), 'message-id');
  if (!value) return null;
  // RFC 5322 §3.6.4 wants angle brackets; RFC 5965's own example omits them.
  const id = /<([^<>\s]+)>/.exec(value)?.[1] ?? value.trim();
  return id !== '' && !/\s/.test(id) ? id : null;
}

/**
 * Exim's classic bounce (its text, not RFC 3464): a text/plain message from Mailer-Daemon saying
 * the message "could not be delivered to one or more of its recipients", then "The following
 * address(es) failed:" with each address indented two spaces and its details four, then the
 * returned message after a "------ This is a copy of the message…" line. Anything less is not one.
 */
function eximBounce(mail: ParsedMail): FeedbackReport | null {
  const text = mail.text;
  if (typeof text !== 'string' || contentTypeOf(mail) !== 'text/plain') return null;
  const from = mail.from?.value.map((mailbox) => mailbox.address ?? '') ?? [];
  if (!from.some((address) => /^mailer-daemon@/i.test(address))) return null;
  const lines = text.split(/\r\n|\r|\n/);
  const flat = text.slice(0, 4096).replace(/\s+/g, ' ');
  if (!flat.includes('could not be delivered to one or more of its recipients')) return null;
  const listStart = lines.findIndex((line) => /The following address\(es\) failed:\s*$/.test(line));
  if (listStart < 0) return null;
  const copyStart = lines.findIndex((line) => /^-{3,} This is a copy of the message\b/.test(line));
  const listEnd = copyStart > listStart ? copyStart : lines.length;
  const action = flat.includes('This is a permanent error') ? 'failed' : null;
  const recipients = eximRecipients(lines.slice(listStart + 1, listEnd), action);
  if (recipients.length === 0) return null;
  const copy = copyStart > listStart ? lines.slice(copyStart + 1).join('\n') : null;
  return {
    kind: 'bounce',
    recipients,
    originalMessageId: copy === null ? null : messageIdIn(copy),
  };
}

function eximRecipients(lines: readonly string[], action: string | null): BounceRecipient[] {
  const found: { address: string; details: string[] }[] = [];
  for (const line of lines) {
    const address = /^ {1,3}<?([^\s<>@]+@[^\s<>@]+?)>?\s*$/.exec(line)?.[1];
    if (address !== undefined) found.push({ address, details: [] });
    else if (/^ {4,}\S/.test(line) && (found.at(-1)?.details.length ?? 0) < MAX_DETAIL_LINES)
      found.at(-1)?.details.push(line.trim());
    if (found.length > MAX_RECIPIENTS) break;
  }
  return found.slice(0, MAX_RECIPIENTS).map(({ address, details }) => {
    // The remote server's reply, when there was one, is the line that starts with its code.
    const reply = details.findIndex((detail) => /^[245]\d\d[ -]/.test(detail));
    const diagnostic = clip((reply >= 0 ? details.slice(reply) : details).join(' '));
    return { recipient: address, action, status: diagnostic && enhancedStatusIn(diagnostic), diagnostic };
  });
}

/**
 * Header-like field blocks separated by blank lines (RFC 3464 §2.1, RFC 5965 §3, RFC 5322 §2.2):
 * `Name: value` lines; lines that are neither a field nor a blank line are skipped.
 */
function fieldBlocks(text: string): FieldBlock[] {
  const blocks: Field[][] = [[]];
  for (const line of unfoldedLines(text)) {
    if (line === '') {
      blocks.push([]);
      continue;
    }
    const field = FIELD.exec(line);
    if (field) blocks.at(-1)?.push({ name: field[1]!.toLowerCase(), value: field[2]!.trim() });
  }
  return blocks.filter((block) => block.length > 0);
}

/**
 * Logical lines: a line that starts with white space continues the one before it (RFC 5322
 * §2.2.3), joined with a single space; a blank line comes out as ''.
 */
function unfoldedLines(text: string): string[] {
  const lines: string[] = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    const last = lines.length - 1;
    const previous = lines[last];
    if (line.trim() === '') lines.push('');
    else if (/^[ \t]/.test(line) && previous) {
      if (previous.length < MAX_FIELD_VALUE)
        lines[last] = `${previous} ${line.trim()}`.slice(0, MAX_FIELD_VALUE);
    } else lines.push(line.slice(0, MAX_FIELD_VALUE));
  }
  return lines;
}

/** The header section of a message: its first block, up to the first blank line (RFC 5322 §2.1). */
function headerFields(message: string): FieldBlock {
  const headers = message.replace(/^\s+/, '');
  const end = headers.search(/\r?\n\r?\n/);
  return fieldBlocks(end < 0 ? headers : headers.slice(0, end))[0] ?? [];
}

function has(block: FieldBlock, name: string): boolean {
  return block.some((field) => field.name === name);
}

function get(block: FieldBlock, name: string): string | null {
  return block.find((field) => field.name === name)?.value ?? null;
}

/** RFC 3464 §2.3.2 and §2.3.6: `type; value`; the value without its type, or null when empty. */
function typedValue(value: string | null): string | null {
  if (value === null) return null;
  const untyped = value.replace(/^[A-Za-z0-9-]+[ \t]*;/, '').trim();
  return untyped === '' ? null : untyped;
}

function unbracket(address: string): string | null {
  const inner = /^<(.*)>$/.exec(address)?.[1] ?? address;
  return inner.trim() === '' ? null : inner.trim();
}

/** The addr-spec in a header such as `Jane Doe <jane@example.org>`; null when it names no address (a redacted To). */
function addressIn(value: string | null): string | null {
  if (value === null) return null;
  return (
    /<([^<>\s]+@[^<>\s]+)>/.exec(value)?.[1] ?? /(?:^|[\s,])([^\s<>,"]+@[^\s<>,"]+)/.exec(value)?.[1] ?? null
  );
}

function clip(text: string | null): string | null {
  if (text === null) return null;
  const clipped = text.replace(/\s+/g, ' ').trim().slice(0, MAX_DIAGNOSTIC).trim();
  return clipped === '' ? null : clipped;
}

/** RFC 2045 §5.2: a message without Content-Type is text/plain. */
function contentTypeOf(mail: ParsedMail): string {
  const header = mail.headers.get('content-type') as { value?: unknown } | undefined;
  return typeof header?.value === 'string' ? header.value.toLowerCase() : 'text/plain';
}

function partText(part: Attachment): string {
  return Buffer.isBuffer(part.content) ? part.content.toString('utf8') : '';
}
