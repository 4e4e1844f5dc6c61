import type { BounceCategory } from './categories.js';
import { classifyFailure, normalise, type FailureVerdict } from './classify.js';
import { MAX_RECIPIENTS } from './feedback-report.js';
import { smtpCommandIn, type SmtpCommand } from './smtp-command.js';
import { originalStart } from './text-formats.js';

/**
 * Prose bounces: the text that sendmail, Exim, qmail, Postfix (without its DSN part), Courier,
 * Exchange, Gmail, Yahoo, Domino, DragonFly, OpenSMTPD and the rest write for people. Every one of
 * them names each failed recipient on a line of its own, or in a sentence such as "delivering your
 * mail to <…>", and puts the reason next to it; the returned message follows a marker
 * (text-formats.ts). The reader finds the recipients in the part before that marker and reads each
 * one's reason from the lines up to the next recipient.
 */

export interface TextRecipient {
  readonly recipient: string | null;
  /** The lines about this recipient, unfolded, or the whole description when they say nothing. */
  readonly diagnostic: string;
  readonly command: SmtpCommand | null;
  readonly verdict: FailureVerdict;
}

/** A description longer than this is not a bounce's; the rest is ignored. */
const MAX_SECTION_LINES = 400;
const MAX_BLOCK_LINES = 24;
const MAX_LINE = 1000;

// A mailbox as bounces print it. The local part excludes quotes and brackets, which surround it.
const ADDRESS = String.raw`[\w.%+!#$&*/=?^\x60{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]|\.(?=[A-Za-z0-9]))*`;
/**
 * A line that starts with an address, after list markers, quote marks and brackets. The address
 * ends at punctuation, white space or a letter of another script ("jane@example.org様"); a dot
 * ends it only when no label follows, so an address is never cut short at a dot of its domain.
 */
const ADDRESS_LINE = new RegExp(
  String.raw`^[\s>*•-]*(?:\d{1,3}[.)]\s+)?["'<(\[]?(${ADDRESS})(?=$|["'>)\]\s:,;(<]|\.(?![A-Za-z0-9])|[^\x00-\x7F])`,
);
/** Sentences that name the recipient a failure is about. */
const ADDRESS_CUES = new RegExp(
  [
    // DragonFly, MailFoundry, KDDI, Domino, X6, InterScan, MailMarshal
    String.raw`(?:deliver(?:ing|y|ed)?|send(?:ing)?|sent|transferring|forwarding) (?:your |the |this )?(?:mail|message|e-?mail)?\s?(?:to|for)\s?:?\s*["'<]?(${ADDRESS})`,
    // IMail, Bigfoot, sendmail transcripts, Exim's "Failed address"
    String.raw`(?:unknown user|user unknown|no such user|invalid recipient|rcpt to|failed address|recipient address|recipient)\s?:?\s*["'<]?(${ADDRESS})`,
    // IMail: "Invalid final delivery userid: <address>"
    String.raw`\b(?:user ?id|user|mailbox|address)\s?:\s*["'<]?(${ADDRESS})`,
    // sendmail's error line for each recipient: "550 <kijitora@example.org>... User unknown"
    String.raw`^\s*[245]\d\d(?:[ -][245]\.\d{1,3}\.\d{1,3})? <(${ADDRESS})>\.\.\.`,
    String.raw`(?:returned permanent errors|following (?:address|recipient)(?:\(?e?s\)?)?(?: failed)?)\s?:\s*["'<]?(${ADDRESS})`,
  ].join('|'),
  'i',
);
const REPLY_LINE = /(?:^|\s)[245]\d\d[ -]|(?<![\w.])[245]\.\d{1,3}\.\d{1,3}(?![\w.])/;

interface Block {
  readonly address: string;
  readonly lines: string[];
  /** sendmail's "550 <address>... reason" says all on one line; what follows is another recipient's. */
  closed: boolean;
}

const ADDRESS_ONLY = new RegExp(String.raw`^[\s>*•-]*["'<]?${ADDRESS}["'>]?:?\s*$`);
const SENDMAIL_ERROR_LINE = /^\s*[245]\d\d(?:[ -][245]\.\d{1,3}\.\d{1,3})? <[^<>\s]+>\.\.\./;

/** The description part of a prose bounce: the lines before the returned message. */
export function descriptionLines(text: string): string[] {
  const lines = text
    .split(/\r\n|\r|\n/, MAX_SECTION_LINES * 4)
    .map((line) => line.slice(0, MAX_LINE).replace(/^> ?(?=[^>])/, ''));
  return lines.slice(0, Math.min(originalStart(lines), MAX_SECTION_LINES));
}

function addressOnLine(line: string): string | null {
  const found = ADDRESS_LINE.exec(line)?.[1] ?? firstGroup(ADDRESS_CUES.exec(line));
  return found === null ? null : found.replace(/[.-]+$/, '');
}

function firstGroup(match: RegExpExecArray | null): string | null {
  return match?.slice(1).find((group) => group !== undefined) ?? null;
}

/** The lines that belong to each recipient, in order of first mention; later mentions add to the first. */
function blocksOf(lines: readonly string[], excluded: ReadonlySet<string>): Block[] {
  const blocks: Block[] = [];
  let current: Block | null = null;
  for (const line of lines) {
    const address = addressOnLine(line);
    if (address !== null && !excluded.has(address.toLowerCase())) {
      current = blocks.find((block) => block.address.toLowerCase() === address.toLowerCase()) ?? null;
      if (current === null) {
        if (blocks.length >= MAX_RECIPIENTS) break;
        current = { address, lines: [], closed: false };
        blocks.push(current);
      }
      current.closed = false;
    }
    // A line that is only the address says nothing more.
    const rest = ADDRESS_ONLY.test(line) ? '' : line.trim();
    if (current !== null && !current.closed && current.lines.length < MAX_BLOCK_LINES && rest !== '')
      current.lines.push(rest);
    if (current !== null && address !== null && SENDMAIL_ERROR_LINE.test(line)) current.closed = true;
  }
  return blocks;
}

/**
 * sendmail's local mailer (mail.local) prints its own complaint in the transcript ("mail.local:
 * unknown user: jane") before sendmail's summary of how the mailer exited ("554 <…>... Service
 * unavailable"): the complaint names the cause, the summary does not.
 */
const LOCAL_MAILER_LINE = /^mail\.local: /i;

/** From the first line that quotes a server's reply, when there is one: the rest is preamble. */
function focus(lines: readonly string[]): string {
  const reply = lines.findIndex((line) => REPLY_LINE.test(line));
  if (reply <= 0) return lines.join(' ');
  const localMailer = lines.slice(0, reply).findIndex((line) => LOCAL_MAILER_LINE.test(line));
  return lines.slice(localMailer >= 0 ? localMailer : reply).join(' ');
}

/**
 * The recipients a prose bounce names and what it says of each. `excluded`: addresses that are
 * not recipients (the bounce's own sender and recipient, the original's sender). With no
 * recipient found, one line with a null recipient carries the whole description.
 */
export function readTextRecipients(
  text: string,
  options: {
    readonly excluded: ReadonlySet<string>;
    readonly permanent: boolean;
    /** The category the reporting system's own words give a recipient's text (reporting-systems.ts). */
    readonly categoryOf?: (diagnostic: string) => BounceCategory | null;
  },
): TextRecipient[] {
  const lines = descriptionLines(text);
  const nonBlank = lines.map((line) => line.trim()).filter((line) => line !== '');
  const whole = focus(nonBlank);
  // The command is named before the reply is quoted ("after RCPT TO:<…>:", then the reply).
  const wholeCommand = smtpCommandIn(normalise(nonBlank.join(' ')));
  const blocks = blocksOf(lines, options.excluded);
  const categoryOf = options.categoryOf ?? (() => null);
  // Read once however many recipients' lines fall back on it: a report may name a hundred.
  let wholeRead: FailureVerdict | undefined;
  const wholeVerdict = () =>
    (wholeRead ??= classifyFailure({
      diagnostic: whole,
      command: wholeCommand,
      permanent: options.permanent,
      category: categoryOf(whole),
    }));
  if (blocks.length === 0)
    return [{ recipient: null, diagnostic: whole, command: wholeCommand, verdict: wholeVerdict() }];
  return blocks.map((block) => {
    const own = focus(block.lines);
    const command = smtpCommandIn(normalise(block.lines.join(' '))) ?? wholeCommand;
    const verdict = classifyFailure({
      diagnostic: own,
      command,
      permanent: options.permanent,
      category: categoryOf(own),
    });
    // The lines about the recipient say nothing a rule can read: the reason is elsewhere in the
    // description (MailMarshal and KDDI give it before the list of recipients).
    if (verdict.category === 'other' && verdict.status === null && verdict.replyCode === null) {
      const shared = wholeVerdict();
      return { recipient: block.address, diagnostic: whole, command, verdict: shared };
    }
    return { recipient: block.address, diagnostic: own, command, verdict };
  });
}
