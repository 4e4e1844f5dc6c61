import type { BounceCategory } from './categories.js';
import { addressIn } from './fields.js';
import { header, type ParsedMessage } from './parsed-message.js';
import { firstCategory, rule, type PhraseRule } from './phrases.js';
import { originalStart } from './text-formats.js';

/**
 * Mail systems that write their own notices and say in them, in words of their own, what went
 * wrong. A notice is recognised by what only that system puts in it (its header fields, its sender,
 * its layout), and then its words mean what that system means by them, whatever the SMTP command
 * or the status: the same "No such user" is a recipient refusal in McAfee's notice and may be a
 * filter's answer elsewhere (classify.ts). Like PowerMTA's own bounce categories, the category
 * found here is trusted over the generic phrases.
 */
export interface ReportingSystem {
  readonly name: string;
  /** Whether a message is one of this system's notices. */
  readonly writes: (message: ParsedMessage) => boolean;
  /** Its words for a cause, in what the notice says of one recipient. */
  readonly says: readonly PhraseRule[];
  /** Its words for a cause, said once for every recipient (au gives the reason above the list). */
  readonly notice: readonly PhraseRule[];
}

function fromAddress(message: ParsedMessage): string {
  return (addressIn(header(message, 'from')) ?? '').toLowerCase();
}

/** The notice's own text: what comes before the returned message (a plain-text bounce quotes it). */
function noticeOf(message: ParsedMessage): string {
  const lines = message.text.split(/\r\n|\r|\n/, 4000);
  return lines.slice(0, originalStart(lines)).join('\n');
}

const SYSTEMS: readonly ReportingSystem[] = [
  {
    // McAfee Email Gateway ("Email and Web Security Appliance"): X-NAI-Header "Modified by
    // McAfee …", Subject "Delivery Status", a text part (often an attachment,
    // deliveryproblems.txt) "--- The following addresses had delivery problems ---" listing
    // `<address>   (reply)`, then the same as a delivery-status part without Final-Recipient. Its
    // notices name a recipient the next hop refused; Sisimai's McAfee module reads these words as
    // an unknown user too.
    name: 'McAfee Email Gateway',
    writes: (message) =>
      /^modified by mcafee/i.test(header(message, 'x-nai-header')?.trim() ?? '') &&
      header(message, 'subject')?.trim() === 'Delivery Status',
    says: [
      rule('user_unknown', 'McAfee Email Gateway', [
        String.raw`\bunknown user\b`,
        String.raw`\buser unknown\b`,
        String.raw`\bno such user\b`,
        String.raw`\buser not exist`,
      ]),
    ],
    notice: [],
  },
  {
    // Symantec (Broadcom) Email Security.cloud, formerly MessageLabs: from
    // MAILER-DAEMON@messagelabs.com with its X-Msg-Ref, "This is the mail delivery agent at …" and
    // "I was unable to deliver your message to the following addresses:", then a delivery-status
    // part. Its own refusal `542 <address> Rejected` (no Remote-MTA) and the next hop's "No such
    // user" that it relays are unknown users in its notices, as Sisimai's MessageLabs module reads
    // them.
    name: 'Symantec Email Security.cloud (MessageLabs)',
    writes: (message) =>
      header(message, 'x-msg-ref') !== null &&
      /this is the mail delivery agent at /i.test(noticeOf(message)) &&
      /unable to deliver your message to the following addresses/i.test(noticeOf(message)),
    says: [
      rule('user_unknown', 'Symantec Email Security.cloud', [
        String.raw`\bno such user\b`,
        String.raw`^542 \S+@\S+ rejected$`,
      ]),
    ],
    notice: [],
  },
  {
    // Verizon Wireless's SMS gateway (vtext.com): from post_master@, "Error: Invalid user address",
    // the next hop's reply under "Error message below:" and the original's envelope under
    // "Message details:" (the recipient as "RCPT TO: <address>"), no command named.
    name: 'Verizon Wireless SMS gateway',
    writes: (message) =>
      fromAddress(message).startsWith('post_master@') &&
      /^error message below:/im.test(noticeOf(message)) &&
      /^message details:/im.test(noticeOf(message)),
    says: [
      rule('user_unknown', 'Verizon Wireless SMS gateway', [
        String.raw`requested action not taken: no such user here`,
      ]),
    ],
    notice: [],
  },
  {
    // au (KDDI) EZweb: "Mail System Error - Returned Mail" from Postmaster@ezweb.ne.jp (au.com) or
    // through its "(EZweb Mail)" relays, with its own verdict above the list of recipients. The
    // verdict wins over the reply quoted under it: an account it calls "disabled" or "temporarily
    // limited" is suspended, not gone, even where the reply says "user unknown".
    name: 'au (KDDI) EZweb',
    writes: (message) =>
      /^mail system error - returned mail$/i.test(header(message, 'subject')?.trim() ?? '') &&
      (/^postmaster@(?:ezweb\.ne\.jp|au\.com)$/.test(fromAddress(message)) ||
        message.headers.some((field) => field.name === 'received' && /\(ezweb mail\)/i.test(field.value))),
    says: [],
    notice: [
      rule('suspended', 'au (KDDI) EZweb', [
        String.raw`the user\(s\) account is disabled`,
        String.raw`the user\(s\) account is temporarily limited`,
      ]),
      rule('mailbox_full', 'au (KDDI) EZweb', [String.raw`the user\(s\) account is temporarily over quota`]),
      rule('expired', 'au (KDDI) EZweb', [String.raw`your message was not delivered within`]),
    ],
  },
  {
    // Google Groups refuses a post through Gmail's mailer-daemon: a plain-text notice with
    // X-Failed-Recipients naming the group and no SMTP reply, in the sender's language ("the group
    // you tried to contact (…) may not exist, or you may not have permission to post messages to
    // the group"), always signed "Google Groups". The group refused the sender: rejected.
    name: 'Google Groups',
    writes: (message) =>
      header(message, 'x-failed-recipients') !== null &&
      header(message, 'x-google-smtp-source') !== null &&
      /^google groups/im.test(noticeOf(message)),
    says: [],
    // Whatever the notice says, in whichever language.
    notice: [rule('rejected', 'Google Groups', [String.raw`^`])],
  },
];

/** The system that wrote a notice, when it is one that says things its own way. */
export function reportingSystemOf(message: ParsedMessage): ReportingSystem | null {
  return SYSTEMS.find((system) => system.writes(message)) ?? null;
}

/**
 * The category a system's notice gives a recipient: what it says of that recipient, else what it
 * says once for all. Both texts normalised (classify.ts `normalise`).
 */
export function categoryBy(
  system: ReportingSystem | null,
  recipientText: string,
  noticeText: string,
): BounceCategory | null {
  if (system === null) return null;
  return firstCategory(system.says, recipientText) ?? firstCategory(system.notice, noticeText);
}
