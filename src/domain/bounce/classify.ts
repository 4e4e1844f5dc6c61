import { HARD_CATEGORIES, type BounceCategory, type BounceVerdict } from './categories.js';
import {
  ADDRESS_PHRASES,
  CAUSE_RULES_AFTER_ADDRESS,
  CAUSE_RULES_FIRST,
  CAUSE_RULES_LAST,
  firstCategory,
  VENDOR_ADDRESS_PHRASES,
} from './phrases.js';
import { smtpCommandIn, type SmtpCommand } from './smtp-command.js';
import { categoryOfStatus, categoryOfSubject, enhancedStatusIn } from './status-codes.js';
import { oneLine } from '../one-line.js';

/**
 * One failure, whether a relay refused during the SMTP transaction or a report came back: the
 * facts an adapter found, turned into the `bounce` object of product.md §9. Pure and total: any
 * input gives a verdict, and the same input always the same one.
 */

export interface FailureFacts {
  /** What the server or the reporting MTA said: the reply, a DSN's Diagnostic-Code, a bounce's text. */
  readonly diagnostic: string;
  /** An enhanced status code from a structured field (a DSN's Status:); the diagnostic's own wins when more specific. */
  readonly status?: string | null;
  /** The SMTP reply code, when the adapter knows it; otherwise read from the diagnostic. */
  readonly replyCode?: number | null;
  /** The command the server refused, when known; otherwise read from the diagnostic. */
  readonly command?: SmtpCommand | null;
  /**
   * true: the MTA gave up (a DSN's Action: failed, a bounce that says so, a 5xx reply); false: it
   * will try again (Action: delayed, a 4xx reply). Null: decided by the codes.
   */
  readonly permanent?: boolean | null;
  /** The category the reporting system gave itself (PowerMTA's bounce categories), trusted over phrases. */
  readonly category?: BounceCategory | null;
}

export interface FailureVerdict extends BounceVerdict {
  readonly replyCode: number | null;
  /** The failure is final for this message (it may still be soft: the address is not proven bad). */
  readonly permanent: boolean;
}

export const MAX_DIAGNOSTIC = 500;
/** A reply rarely runs past a few lines; phrases are looked for in this much of it. */
const MAX_SCAN = 4000;

// An SMTP reply code where a reply starts: at the start of the text or after a separator, followed
// by a space or hyphen and then an enhanced status, a word or a bracket; never inside an address,
// an IP address, a port or a number with more digits.
const REPLY_CODE = /(?:^|[\s:'"(<>=[])([45][0-5]\d)(?:[ -](?=[245]\.\d|[#<[(a-z'"]))/;

export function normalise(text: string): string {
  return joinContinuations(text.slice(0, MAX_SCAN).toLowerCase().replace(/\s+/g, ' ').trim());
}

// The first line of a multiline reply (RFC 5321 §4.2.1): its code, a hyphen, maybe an enhanced status.
const CONTINUED_REPLY = /(?:^|[\s:'"(<[])([245]\d\d)-(?:([245]\.\d{1,3}\.\d{1,3}) )?/;

/**
 * A multiline reply repeats its code (and status) on every line: "550-5.2.1 … at a rate that
 * 550-5.2.1 prevents additional messages …". Joined into one sentence, the repeats would split the
 * server's phrases, so every repeat after the first is taken out.
 */
function joinContinuations(text: string): string {
  const first = CONTINUED_REPLY.exec(text);
  if (first === null) return text;
  const [, code, status] = first;
  const prefix = status === undefined ? `${code}[ -]` : `${code}[ -]${status.replace(/\./g, '\\.')} `;
  const start = first.index + first[0].length;
  return text.slice(0, start) + text.slice(start).replace(new RegExp(` ${prefix}`, 'g'), ' ');
}

export function replyCodeOf(text: string): number | null {
  const code = REPLY_CODE.exec(text.slice(0, MAX_SCAN).toLowerCase())?.[1];
  return code === undefined ? null : Number(code);
}

/** The more specific of the structured status and the one in the text (a DSN often says 5.0.0). */
function bestStatus(field: string | null | undefined, text: string): string | null {
  const fromField = typeof field === 'string' ? enhancedStatusIn(field) : null;
  const fromText = enhancedStatusIn(text);
  if (fromField === null) return fromText;
  if (fromText !== null && fromText[0] === fromField[0] && /\.0\.0$/.test(fromField)) return fromText;
  return fromField;
}

/**
 * A phrase saying the mailbox does not exist proves it only where the server said it of the
 * address: in reply to RCPT TO, or with an addressing status (X.1.x). Without either it may be a
 * filter speaking (Japanese carriers answer "User unknown" to mail their users' filters refuse,
 * and content filters after DATA do the same), and with an X.7 status it is a policy; both are
 * soft. A known system's own words for an unknown recipient (VENDOR_ADDRESS_PHRASES) need no more.
 */
function addressVerdict(vendor: boolean, status: string | null, command: SmtpCommand | null): BounceCategory {
  const [, subject, detail] = status?.split('.') ?? [];
  if (subject === '7') return 'rejected';
  if (categoryOfStatus(status) === 'has_moved') return 'has_moved';
  // X.1.7 and X.1.8 are about the sender's address.
  if (subject === '1' && detail !== '7' && detail !== '8') return 'user_unknown';
  if (command === 'MAIL' || command === 'EHLO' || command === 'CONN') return 'rejected';
  return vendor || command === 'RCPT' ? 'user_unknown' : 'rejected';
}

function causeOf(text: string, status: string | null, command: SmtpCommand | null): BounceCategory | null {
  const first = firstCategory(CAUSE_RULES_FIRST, text);
  if (first !== null) return first;
  // X.1.7 and X.1.8: the sender's address or domain was refused; whatever the text says of an
  // address or a domain is about the sender's.
  if (status !== null && /^[45]\.1\.[78]$/.test(status)) return 'rejected';
  // Exchange Online's directory-based edge blocking refuses addresses not in the tenant this way.
  if (status === '5.4.1' && text.includes('recipient address rejected: access denied')) return 'user_unknown';
  if (VENDOR_ADDRESS_PHRASES.pattern.test(text)) return addressVerdict(true, status, command);
  if (ADDRESS_PHRASES.pattern.test(text)) return addressVerdict(false, status, command);
  return firstCategory(CAUSE_RULES_AFTER_ADDRESS, text) ?? firstCategory(CAUSE_RULES_LAST, text);
}

/** When no phrase names a cause: the status, then what the codes and the command imply. */
function fallbackOf(
  status: string | null,
  replyCode: number | null,
  command: SmtpCommand | null,
): BounceCategory {
  // RFC 7504: 521 "host does not accept mail", 556 "domain does not accept mail" (null MX).
  if (replyCode === 521 || replyCode === 556) return 'host_unknown';
  const named = categoryOfStatus(status);
  if (named !== null) return named;
  // Refused before any address was given: the server refuses the sending host. A generic security
  // or policy status (`554 5.7.1` in the greeting) says no more than the refusal does.
  const atConnection = command === 'CONN' || command === 'EHLO';
  if (atConnection && status?.split('.')[1] === '7') return 'blocked';
  const subject = categoryOfSubject(status);
  if (subject !== null) return subject;
  if (atConnection) return 'blocked';
  // RFC 5321 §4.2.2: 552 "exceeded storage allocation", 452 "insufficient system storage".
  if (replyCode === 552) return 'mailbox_full';
  if (replyCode === 452 || replyCode === 421) return 'system_error';
  return 'other';
}

/** Categories that say no more than "it did not work"; a final failure with a 4.x.x means the MTA gave up. */
const VAGUE: ReadonlySet<BounceCategory> = new Set(['network_error', 'system_error', 'other']);

/**
 * Amazon SES wraps the remote server's reply in its own status and text:
 * `5.1.0 - Unknown address error 550-'5.7.1 <…>... Access denied' (delivery attempts: 0)`.
 * The quoted reply is what the server said; SES's words are its guess.
 */
const SES_WRAPPED = /^\s*[245]\.\d{1,3}\.\d{1,3} - [^']{0,200}?([245]\d\d)[ -]'([^']{1,2000})'/;

function unwrap(diagnostic: string): string {
  const ses = SES_WRAPPED.exec(diagnostic);
  return ses ? `${ses[1]} ${ses[2]}` : diagnostic;
}

export function classifyFailure(facts: FailureFacts): FailureVerdict {
  const given = typeof facts.diagnostic === 'string' ? facts.diagnostic : '';
  const raw = unwrap(given);
  const text = normalise(raw);
  const status = bestStatus(facts.status, raw);
  const replyCode =
    typeof facts.replyCode === 'number' && facts.replyCode >= 200 && facts.replyCode < 600
      ? facts.replyCode
      : replyCodeOf(raw);
  const command = facts.command ?? smtpCommandIn(text);
  const codeClass = status?.[0] ?? (replyCode === null ? null : String(replyCode)[0]);
  const permanent = typeof facts.permanent === 'boolean' ? facts.permanent : codeClass !== '4';
  // A reporting system's "unknown user" is its own words for one, as good as a known system's
  // phrase, and like one it gives way to a policy status or a refusal before any recipient.
  const reported = facts.category === 'user_unknown' ? addressVerdict(true, status, command) : facts.category;
  let category = reported ?? causeOf(text, status, command) ?? fallbackOf(status, replyCode, command);
  // A final failure the server called temporary, or a connection that never worked: the MTA
  // retried until its queue lifetime ran out.
  if (permanent && codeClass === '4' && VAGUE.has(category)) category = 'expired';
  if (permanent && codeClass === null && category === 'network_error') category = 'expired';
  return {
    type: isHard(category, status, permanent) ? 'hard' : 'soft',
    category,
    status,
    diagnostic: oneLine(given).slice(0, MAX_DIAGNOSTIC).trim(),
    replyCode,
    permanent,
  };
}

/**
 * Hard only when the address is proven bad and the failure is final. A 4.x.x status means the
 * server itself called it temporary, so it proves nothing, unless the status names the same
 * hard cause (Postfix answers 450 4.1.1 for an unknown user while soft_bounce is on, and bounces
 * it at the end of the queue lifetime).
 */
function isHard(category: BounceCategory, status: string | null, permanent: boolean): boolean {
  if (!HARD_CATEGORIES.has(category) || !permanent) return false;
  return status?.[0] !== '4' || categoryOfStatus(status) === category;
}

/** A relay's synchronous refusal, as nodemailer reports it: `responseCode`, `response`, `command`. */
export interface SmtpReply {
  readonly code: number | null;
  readonly text: string;
  /** The command refused: 'RCPT TO', 'RCPT', 'MAIL FROM', 'DATA', 'EHLO', 'CONN', …; any case. */
  readonly command?: string | null;
}

/**
 * Classifies a relay's refusal during the SMTP transaction, by the same rules as a report that
 * comes back. A 4xx reply is transient, so always soft; a 5xx is hard only when it proves the
 * address bad (product.md §9).
 */
export function classifyReply(reply: SmtpReply): BounceVerdict & { readonly replyCode: number | null } {
  const text = typeof reply?.text === 'string' ? reply.text : '';
  const code =
    typeof reply?.code === 'number' && Number.isInteger(reply.code) && reply.code >= 200 && reply.code < 600
      ? reply.code
      : null;
  const command =
    typeof reply?.command === 'string' ? smtpCommandIn(`after ${reply.command.toLowerCase()}`) : null;
  const verdict = classifyFailure({
    diagnostic: text,
    replyCode: code,
    command,
    // Without a reply the relay was not reached (a timeout, a refused connection): it is retried.
    permanent: code === null ? false : code >= 500,
  });
  // The relay refused Herald's own login (`535 5.7.8`), or asked for one (`530 5.7.0`, RFC 4954
  // §6), or refused its STARTTLS: the sender is rejected, whatever the words say of
  // authentication or of a mailbox (`auth_failure` is the recipient's SPF, DKIM and DMARC checks).
  const login =
    code === 530 || (typeof reply?.command === 'string' && /^(auth|starttls)\b/i.test(reply.command.trim()));
  return {
    type: login ? 'soft' : verdict.type,
    category: login ? 'rejected' : verdict.category,
    status: verdict.status,
    diagnostic: verdict.diagnostic,
    replyCode: verdict.replyCode,
  };
}
