import { header, type ParsedMessage } from './parsed-message.js';

/**
 * How the MTAs that write their bounces as prose (no RFC 3464 part, or a broken one) mark them:
 * who sends them, what they are called, where the returned message starts, and how a delay warning
 * differs from a final failure. Named after the software that writes each form.
 */

/** Local parts and display names of the senders of bounces (RFC 3464 §2 leaves the From free). */
const BOUNCE_SENDER = new RegExp(
  [
    // the usual: sendmail, Postfix, Exim, qmail, Gmail, Yahoo, Zoho, DragonFly, OpenSMTPD, …
    String.raw`^(?:mailer-daemon|mailer_daemon|mail-daemon|mailerdaemon|postmaster|post_master|mail\.delivery\.system|maildelivery|mdaemon|sysadmin)@`,
    String.raw`^(?:mailer-daemon|postmaster)$`,
  ].join('|'),
  'i',
);
const BOUNCE_SENDER_NAME =
  /mailer[- ]daemon|mail delivery (?:subsystem|system|service)|mail deliver system|postmaster|system administrator|ndr administrator|interscan|e-mail interconnect/i;

/** Subjects of bounces and delay warnings, in the languages the corpus of real bounces shows. */
const BOUNCE_SUBJECT = new RegExp(
  [
    String.raw`undeliver(?:able|ed)`,
    String.raw`delivery (?:status notification|failure|failed|has failed|notification|problem)`,
    String.raw`(?:failure|failed|permanent) (?:notice|delivery)`,
    String.raw`returned (?:mail|to sender)`,
    String.raw`mail delivery failed`,
    String.raw`mail system error`,
    String.raw`could not be delivered`,
    String.raw`non[- ]?delivery`,
    String.raw`delivery (?:report|warning|delay)`,
    String.raw`delayed mail`,
    String.raw`could not send (?:mail|message)`,
    String.raw`error sending your mail`,
    String.raw`mail failure`,
    String.raw`message delivery has failed`,
    String.raw`メールエラー|配信できません|不達`,
  ].join('|'),
  'i',
);

/** Subjects and headers of auto-replies (RFC 3834), which are not bounces though they come back too. */
const AUTO_REPLY_SUBJECT =
  /^(?:auto(?:matic)?[- ]?(?:reply|response|respons)|autoreply|out of (?:the )?office|away|vacation|abwesenheit|absence|自動応答)|\b(?:auto(?:matic)? reply|out of office|away until)\b/i;

export function isBounceSender(message: ParsedMessage): boolean {
  const from = header(message, 'from') ?? '';
  const address = /<([^<>]*)>/.exec(from)?.[1] ?? from.trim();
  return BOUNCE_SENDER.test(address) || BOUNCE_SENDER_NAME.test(from);
}

export function hasBounceSubject(message: ParsedMessage): boolean {
  return BOUNCE_SUBJECT.test(header(message, 'subject') ?? '');
}

/**
 * RFC 3834 auto-replies and vacation notices: Auto-Submitted: auto-replied from a person (not a
 * daemon), X-Autoreply, Precedence: auto_reply, or an auto-reply subject. Exchange marks its own
 * non-delivery reports auto-replied too, so a bounce sender or subject wins over these signs.
 */
export function isAutoReply(message: ParsedMessage): boolean {
  const subject = header(message, 'subject') ?? '';
  const autoSubmitted = (header(message, 'auto-submitted') ?? '').toLowerCase();
  const precedence = (header(message, 'precedence') ?? '').toLowerCase();
  return (
    AUTO_REPLY_SUBJECT.test(subject) ||
    autoSubmitted.startsWith('auto-replied') ||
    header(message, 'x-autoreply') !== null ||
    header(message, 'x-autorespond') !== null ||
    precedence === 'auto_reply'
  );
}

/**
 * Lines where a prose bounce stops describing the failure and starts returning the message (or its
 * headers). Everything from there on is the original, whose addresses are not recipients.
 */
const ORIGINAL_STARTS: readonly RegExp[] = [
  /^-+ ?this is a copy of the message/i, // Exim
  /^-+ ?the header of the original message/i, // 1&1, GMX
  /^-* ?below this line is a copy of the message/i, // qmail, Yahoo
  /^-* ?(?:original|unsent|returned) message(?: header)?s? (?:follows?|-+|is following)/i, // sendmail v5, IMail, X2
  /^-+ ?original message -+/i, // Gmail (old)
  /^original message headers:/i, // Exchange 2007+, Office 365
  /^message headers follow/i, // DragonFly
  /^original message:/i, // Verizon MMS
  /^-+ ?(?:message|header)s? (?:text|header) follows/i, // Domino, sendmail
  /^-+ ?the original message/i,
  /^content-type: (?:message\/rfc822|text\/rfc822-headers)/i, // a MIME part pasted as text
  /^-{4,} ?(?:forwarded|original) message/i,
];

/** Field names that open a returned message's header section when no marker announces it. */
const HEADER_START =
  /^(?:received|return-path|dkim-signature|x-received|arc-seal|delivered-to|message-id|mime-version): /i;

/** Where the returned message starts in the lines of a prose bounce; lines.length when nowhere. */
export function originalStart(lines: readonly string[]): number {
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index]!.trim();
    if (ORIGINAL_STARTS.some((marker) => marker.test(line))) return index;
    // Three header fields in a row, the first a trace or identity field: a header section.
    if (
      HEADER_START.test(line) &&
      [1, 2].every((offset) => /^(?:[\w-]+: |\s)/.test(lines[index + offset] ?? ''))
    )
      return index;
  }
  return lines.length;
}

/** A delay warning rather than a final failure: the MTA is still trying. */
const DELAY_SUBJECT = /\bdelay(?:ed)?\b|\bwarning\b|\(delay\)|still being retried/i;
const DELAY_TEXT =
  /this is a warning only|warning: message .{0,80} delayed|has not yet been delivered|will (?:continue|keep) (?:to )?(?:try|retry)|still being retried|delivery is delayed|delivery (?:attempts )?will continue|not been able to deliver .{0,40} (?:yet|so far)/i;

export function isDelayWarning(subject: string, text: string): boolean {
  return DELAY_SUBJECT.test(subject) || DELAY_TEXT.test(text.slice(0, 8000));
}
