import { classifyFailure, MAX_DIAGNOSTIC } from './classify.js';
import { enhancedStatusIn } from './status-codes.js';
import { MAX_RECIPIENTS, type BounceRecipient } from './feedback-report.js';
import type { BounceCategory } from './categories.js';
import {
  fieldBlocks,
  get,
  has,
  typedValue,
  unbracket,
  valueType,
  type Field,
  type FieldBlock,
} from './fields.js';
import type { SmtpCommand } from './smtp-command.js';
import { oneLine } from '../one-line.js';

/**
 * RFC 3464 delivery status notifications: the `message/delivery-status` part (and its UTF-8 form,
 * RFC 6533), or the same fields pasted into a text part, as Amazon WorkMail and forwarded reports do.
 */

/** RFC 3464 §2.3.3. */
const ACTIONS = new Set(['failed', 'delayed', 'delivered', 'relayed', 'expanded']);

/** One per-recipient block, as facts. */
export interface DsnLine {
  readonly recipient: string | null;
  readonly action: string | null;
  readonly status: string | null;
  readonly diagnostic: string | null;
  /** The Diagnostic-Code's type, lowercased: 'smtp', 'x-postfix', 'x-unix', … */
  readonly diagnosticType: string | null;
  /** The category the reporting MTA itself gave (PowerMTA), when it gives one. */
  readonly vendorCategory?: BounceCategory | null;
}

/** What the human-readable part of the same report says about a recipient, to fill the DSN's gaps. */
export interface DsnHint {
  readonly diagnostic: string | null;
  readonly command: SmtpCommand | null;
}

export function dsnLines(text: string): DsnLine[] {
  if (typeof text !== 'string') return [];
  // RFC 3464 §2.1: a per-message block, then one block per recipient. Blocks are told apart by
  // their fields rather than their position, so a missing or extra blank line loses nothing.
  return fieldBlocks(text)
    .flatMap(splitRecipients)
    .filter((block) => ['final-recipient', 'original-recipient', 'action'].some((name) => has(block, name)))
    .slice(0, MAX_RECIPIENTS)
    .map(lineOf);
}

/**
 * Some MTAs (AOL's among them) leave out the blank line between per-recipient blocks: a recipient
 * field that repeats starts the next recipient.
 */
function splitRecipients(block: FieldBlock): FieldBlock[] {
  const blocks: Field[][] = [[]];
  for (const field of block) {
    const current = blocks.at(-1)!;
    const recipientField = field.name === 'final-recipient' || field.name === 'original-recipient';
    if (recipientField && current.some((seen) => seen.name === field.name)) blocks.push([field]);
    else current.push(field);
  }
  return blocks;
}

/**
 * The recipient's address: Final-Recipient, unless it is not an address at all (Exim puts a file
 * path there for deliveries to a file) or names a host that is not a domain; then Original-Recipient.
 * A source route (`@relay.example:user@example.org`, RFC 5321 §4.1.2) is dropped.
 */
function recipientOf(block: FieldBlock): string | null {
  const candidates = ['final-recipient', 'original-recipient'].map((name) => {
    const value = typedValue(get(block, name));
    const address = value === null ? null : unbracket(value.replace(/^<?(?:@[^:,<>\s]+[,:])+/, '<'));
    return address === null ? null : address;
  });
  const plausible = candidates.find(
    (address) => address !== null && /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(address),
  );
  return plausible ?? candidates.find((address) => address !== null) ?? null;
}

function lineOf(block: FieldBlock): DsnLine {
  const diagnosticField = get(block, 'diagnostic-code');
  const action =
    get(block, 'action')
      ?.toLowerCase()
      .split(/[\s(;]/, 1)[0] ?? '';
  return {
    recipient: recipientOf(block),
    action: ACTIONS.has(action) ? action : null,
    status: enhancedStatusIn(get(block, 'status') ?? ''),
    diagnostic: clip(typedValue(diagnosticField)),
    diagnosticType: valueType(diagnosticField),
    vendorCategory: POWERMTA_CATEGORIES[get(block, 'x-powermta-bouncecategory')?.toLowerCase() ?? ''] ?? null,
  };
}

/**
 * PowerMTA classifies every bounce against its own table of remote replies and says so in
 * X-PowerMTA-BounceCategory; its categories map onto Herald's.
 */
const POWERMTA_CATEGORIES: Readonly<Record<string, BounceCategory>> = {
  'bad-mailbox': 'user_unknown',
  'bad-domain': 'host_unknown',
  'inactive-mailbox': 'suspended',
  'quota-issues': 'mailbox_full',
  'message-expired': 'expired',
  'no-answer-from-host': 'network_error',
  'bad-connection': 'network_error',
  'routing-errors': 'network_error',
  'policy-related': 'policy',
  'content-related': 'policy',
  'spam-related': 'spam',
  'virus-related': 'virus',
  'relaying-issues': 'rejected',
  'invalid-sender': 'rejected',
  'bad-configuration': 'system_error',
  'protocol-errors': 'system_error',
};

/** A DSN line classified; `hint` is what the report's text part says of the same recipient. */
export function classifyDsnLine(line: DsnLine, hint: DsnHint | null = null): BounceRecipient {
  const diagnostic = line.diagnostic ?? hint?.diagnostic ?? null;
  const verdict = classifyFailure({
    diagnostic: diagnostic ?? '',
    status: line.status,
    command: hint?.command ?? null,
    permanent: line.action === 'failed' ? true : line.action === 'delayed' ? false : null,
    category: line.vendorCategory ?? null,
  });
  // Diagnostic-Code: X-Unix; or X-Postfix; with nothing more specific: the local delivery agent failed.
  const localAgent = line.diagnosticType === 'x-unix' || line.diagnosticType === 'x-postfix';
  const category = verdict.category === 'other' && localAgent ? 'system_error' : verdict.category;
  return {
    recipient: line.recipient,
    action: line.action,
    // The Status field as given; the diagnostic's own code only when the field is missing. The
    // classification above used the more specific of the two.
    status: line.status ?? verdict.status,
    diagnostic: clip(diagnostic),
    category,
    type: verdict.type,
    replyCode: verdict.replyCode,
  };
}

/** The pure part of the old API: an RFC 3464 delivery-status body → recipients. Never throws. */
export function parseDeliveryStatus(text: string): { readonly recipients: readonly BounceRecipient[] } {
  return { recipients: dsnLines(text).map((line) => classifyDsnLine(line)) };
}

export function clip(text: string | null): string | null {
  if (text === null) return null;
  const clipped = oneLine(text).slice(0, MAX_DIAGNOSTIC).trim();
  return clipped === '' ? null : clipped;
}
