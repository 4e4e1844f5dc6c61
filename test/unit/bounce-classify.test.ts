import { describe, it, expect } from 'vitest';
import { HARD_CATEGORIES, BOUNCE_CATEGORIES } from '../../src/domain/bounce/categories.js';
import { classifyFailure, classifyReply } from '../../src/domain/bounce/classify.js';
import { categoryOfStatus } from '../../src/domain/bounce/status-codes.js';
import { smtpCommandIn } from '../../src/domain/bounce/smtp-command.js';

type Row = readonly [
  code: number | null,
  text: string,
  command: string | null,
  type: 'hard' | 'soft',
  category: string,
  status: string | null,
];

/** A relay's synchronous refusal, as nodemailer reports it, and the verdict (product.md §9). */
const replies: readonly Row[] = [
  // Unknown recipients: proven by the status, by the command, or by a known system's own words
  [
    550,
    '550 5.1.1 <jane@example.org>: Recipient address rejected: User unknown in local recipient table',
    'RCPT TO',
    'hard',
    'user_unknown',
    '5.1.1',
  ],
  [550, '550 5.1.1 <jane@example.org>... User unknown', null, 'hard', 'user_unknown', '5.1.1'],
  [
    550,
    "550-5.1.1 The email account that you tried to reach does not exist. Please try\n550-5.1.1 double-checking the recipient's email address for typos",
    'RCPT TO',
    'hard',
    'user_unknown',
    '5.1.1',
  ],
  [
    550,
    '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup',
    'RCPT TO',
    'hard',
    'user_unknown',
    '5.1.10',
  ],
  [550, '550 Requested action not taken: mailbox unavailable', 'RCPT TO', 'hard', 'user_unknown', null],
  [
    550,
    '550 Requested action not taken: mailbox unavailable (S2017062302)',
    null,
    'hard',
    'user_unknown',
    null,
  ],
  [550, 'User unknown', 'RCPT TO', 'hard', 'user_unknown', null],
  [550, '550 No such user here', 'RCPT', 'hard', 'user_unknown', null],
  // ...and the same words where they prove nothing: after DATA, or with a policy status
  [550, '550 : User unknown', 'DATA', 'soft', 'rejected', null],
  [550, '550 No such user here', null, 'soft', 'rejected', null],
  [
    554,
    '554 5.7.1 <jane@example.org>: Recipient address rejected: User unknown',
    'RCPT TO',
    'soft',
    'rejected',
    '5.7.1',
  ],
  [550, '550 5.1.1 user unknown', 'MAIL FROM', 'hard', 'user_unknown', '5.1.1'],
  // Domains that do not exist, null MX (RFC 7505), moved mailboxes
  [
    550,
    '550 5.1.2 Host unknown (Name server: mx.example.org: host not found)',
    'RCPT TO',
    'hard',
    'host_unknown',
    '5.1.2',
  ],
  [556, '556 5.1.10 Recipient address has null MX', 'RCPT TO', 'hard', 'host_unknown', '5.1.10'],
  [521, '521 example.org does not accept mail', null, 'hard', 'host_unknown', null],
  [551, '551 5.1.6 User has moved; please try <jane@example.net>', 'RCPT TO', 'hard', 'has_moved', '5.1.6'],
  [550, '550 5.1.6 recipient no longer on server: jane@example.org', 'RCPT TO', 'hard', 'has_moved', '5.1.6'],
  // Mailbox full, message too big: soft whatever the class
  [552, '552 5.2.2 Mailbox full', 'RCPT TO', 'soft', 'mailbox_full', '5.2.2'],
  [452, '452 4.2.2 Mailbox full', 'RCPT TO', 'soft', 'mailbox_full', '4.2.2'],
  [
    552,
    "552-5.2.2 The recipient's inbox is out of storage space and inactive.",
    'RCPT TO',
    'soft',
    'mailbox_full',
    '5.2.2',
  ],
  [552, '552 Requested mail action aborted: exceeded storage allocation', null, 'soft', 'mailbox_full', null],
  [
    552,
    '552 5.3.4 Message size exceeds fixed maximum message size',
    'DATA',
    'soft',
    'message_too_big',
    '5.3.4',
  ],
  // Disabled accounts
  [
    550,
    '550 5.2.1 The email account that you tried to reach is disabled.',
    'RCPT TO',
    'soft',
    'suspended',
    '5.2.1',
  ],
  [525, '525 5.7.13 Disabled recipient address', 'RCPT TO', 'soft', 'suspended', '5.7.13'],
  // 5.7.x: policy, authentication, blocked sender: never hard
  [
    550,
    '550 5.7.1 Service unavailable; client [192.0.2.10] blocked using zen.example.net',
    'RCPT TO',
    'soft',
    'blocked',
    '5.7.1',
  ],
  [
    550,
    "550-5.7.26 Unauthenticated email from example.com is not accepted due to domain's DMARC policy",
    'DATA',
    'soft',
    'auth_failure',
    '5.7.26',
  ],
  [
    550,
    '550 5.7.25 The IP address sending this message does not have a PTR record setup',
    'EHLO',
    'soft',
    'blocked',
    '5.7.25',
  ],
  [554, '554 5.7.9 Message not accepted for policy reasons.', 'DATA', 'soft', 'policy', '5.7.9'],
  [550, '550 5.7.1 Message rejected as spam by Content Filtering', 'DATA', 'soft', 'spam', '5.7.1'],
  [554, '554 5.7.1 Relay access denied', 'RCPT TO', 'soft', 'rejected', '5.7.1'],
  [
    550,
    '550 5.7.606 Access denied, banned sending IP [192.0.2.10].',
    'RCPT TO',
    'soft',
    'blocked',
    '5.7.606',
  ],
  [554, '554 5.7.0 Reject, id=12345-01 - VIRUS: Eicar-Test-Signature', 'DATA', 'soft', 'virus', '5.7.0'],
  // Rate limits, transient failures, replies without enhanced codes
  [
    550,
    '550-5.2.1 The user you are trying to contact is receiving mail at a rate that\r\n550-5.2.1 prevents additional messages from being delivered. For more\r\n550 5.2.1 information, please visit https://support.example.com/mail/?p=ReceivingRatePerm',
    'DATA',
    'soft',
    'rate_limited',
    '5.2.1',
  ],
  [
    421,
    '421 4.7.0 [TSS04] Messages from 192.0.2.10 temporarily deferred due to unexpected volume',
    'MAIL FROM',
    'soft',
    'rate_limited',
    '4.7.0',
  ],
  [
    450,
    '450 4.1.1 <jane@example.org>: Recipient address rejected: unverified address',
    'RCPT TO',
    'soft',
    'user_unknown',
    '4.1.1',
  ],
  [451, '451 Temporary local problem - please try later', 'RCPT TO', 'soft', 'system_error', null],
  [421, '421 Service not available, closing transmission channel', 'CONN', 'soft', 'system_error', null],
  [554, '554 Transaction failed', 'DATA', 'soft', 'system_error', null],
  [550, '550 Denied by policy', 'MAIL FROM', 'soft', 'policy', null],
  [554, '554 mx.example.org ESMTP not accepting connections', 'CONN', 'soft', 'system_error', null],
  [550, '550 Rejected', 'EHLO', 'soft', 'blocked', null],
  // A generic X.7 status says no more than a refusal of the connection does; after RCPT it is policy.
  [554, '554 5.7.1 go away', 'CONN', 'soft', 'blocked', '5.7.1'],
  [421, '421 4.7.0 try later', 'CONN', 'soft', 'blocked', '4.7.0'],
  [550, '550 5.7.1 go away', 'RCPT TO', 'soft', 'policy', '5.7.1'],
  [501, '501 5.5.2 go away', 'EHLO', 'soft', 'policy', '5.5.2'],
  // The relay refused Herald's login: the sender is rejected; nothing of the recipient's checks.
  [
    535,
    '535 5.7.8 Error: authentication failed: authentication failure',
    'AUTH PLAIN',
    'soft',
    'rejected',
    '5.7.8',
  ],
  [530, '530 5.7.0 Authentication required', 'MAIL FROM', 'soft', 'rejected', '5.7.0'],
  // A refused STARTTLS is the sender's settings, whatever status the relay gives with it.
  [554, '554 5.1.1 TLS not available', 'STARTTLS', 'soft', 'rejected', '5.1.1'],
  [550, '', null, 'soft', 'other', null],
  [
    null,
    'connect to mx.example.org[192.0.2.25]:25: Connection timed out',
    null,
    'soft',
    'network_error',
    null,
  ],
];

describe('classifyReply', () => {
  it.each(replies)('%s %s (after %s) → %s %s', (code, text, command, type, category, status) => {
    const verdict = classifyReply({ code, text, command });
    expect(verdict).toMatchObject({ type, category, status });
    expect(verdict.replyCode).toBe(code === null ? null : code);
  });

  it('gives the diagnostic unfolded and at most 500 characters', () => {
    const verdict = classifyReply({
      code: 550,
      text: `550-5.1.1 a\r\n550 5.1.1 ${'x'.repeat(600)}`,
      command: 'RCPT TO',
    });
    expect(verdict.diagnostic).toMatch(/^550-5\.1\.1 a 550 5\.1\.1 x+$/);
    expect(verdict.diagnostic.length).toBeLessThanOrEqual(500);
  });

  it('drops NUL and other control characters, which PostgreSQL text cannot hold', () => {
    const verdict = classifyReply({
      code: 550,
      text: '550 5.1.1 no\u0000\u0000 such\u0007user\u0085',
      command: null,
    });
    expect(verdict.diagnostic).toBe('550 5.1.1 no such user');
  });

  it('is hard exactly for the hard categories, and then only for a 5xx', () => {
    for (const [code, text, command] of replies) {
      const verdict = classifyReply({ code, text, command });
      if (verdict.type === 'hard') {
        expect(HARD_CATEGORIES.has(verdict.category)).toBe(true);
        expect(code === null || code >= 500).toBe(true);
      }
    }
  });
});

describe('classifyFailure', () => {
  it.each([
    // A final failure with a transient status: the MTA gave up retrying
    [
      {
        diagnostic: 'connect to mx.example.org[192.0.2.25]:25: Connection timed out',
        status: '4.4.1',
        permanent: true,
      },
      'expired',
      'soft',
    ],
    [{ diagnostic: 'retry timeout exceeded', permanent: true }, 'expired', 'soft'],
    // The same text while the MTA is still trying
    [
      {
        diagnostic: 'connect to mx.example.org[192.0.2.25]:25: Connection timed out',
        status: '4.4.1',
        permanent: false,
      },
      'network_error',
      'soft',
    ],
    // A delay warning never proves an address bad
    [{ diagnostic: '550 5.1.1 User unknown', status: '5.1.1', permanent: false }, 'user_unknown', 'soft'],
    // Postfix's soft_bounce: 450 4.1.1, bounced at the end of the queue lifetime
    [
      {
        diagnostic:
          '450 4.1.1 <jane@example.org>: Recipient address rejected: User unknown in virtual alias table',
        status: '4.1.1',
        permanent: true,
      },
      'user_unknown',
      'hard',
    ],
    // Gmail's DNS failure with a 4.0.0: not proof
    [
      {
        diagnostic:
          "DNS Error: DNS type 'mx' lookup of example.org responded with code NXDOMAIN Domain name not found: example.org",
        status: '4.0.0',
        permanent: true,
      },
      'host_unknown',
      'soft',
    ],
    // Amazon SES's own guess wraps the remote reply
    [
      {
        diagnostic:
          "5.1.0 - Unknown address error 550-'5.7.1 <jane@example.org>... Access denied' (delivery attempts: 0)",
        status: '5.0.0',
        permanent: true,
      },
      'policy',
      'soft',
    ],
    // The sender's address, not the recipient's
    [
      {
        diagnostic:
          '553 5.1.8 <orders@shop.example.com>... Domain of sender address orders@shop.example.com does not exist',
        permanent: true,
      },
      'rejected',
      'soft',
    ],
    // A local delivery agent failed
    [
      { diagnostic: 'procmail: Couldn\'t create "/var/spool/mail/jane"', status: '5.1.1', permanent: true },
      'system_error',
      'soft',
    ],
    // The reporting system's own category (PowerMTA) is trusted
    [
      {
        diagnostic: '550 5.2.1 <jane@example.org>... User Unknown',
        status: '5.2.1',
        permanent: true,
        category: 'user_unknown' as const,
      },
      'user_unknown',
      'hard',
    ],
    // ...but its "unknown user" gives way to a policy status, as any known system's words do
    [
      {
        diagnostic: '550 5.7.1 <jane@example.org>... User unknown',
        status: '5.7.1',
        permanent: true,
        category: 'user_unknown' as const,
      },
      'rejected',
      'soft',
    ],
    [
      {
        diagnostic: '550 <jane@example.org>... User unknown',
        command: 'MAIL' as const,
        permanent: true,
        category: 'user_unknown' as const,
      },
      'rejected',
      'soft',
    ],
  ] as const)('%o → %s %s', (facts, category, type) => {
    expect(classifyFailure(facts)).toMatchObject({ category, type });
  });

  /** What MTAs and providers say in their own notices, each read for the cause it names. */
  it.each([
    // Exim as cPanel configures it: its cannot_route_message, "blacklisted" being only a guess
    [
      'The mail server could not deliver mail to jane@example.org.  The account or domain may not exist, they may be blacklisted, or missing the proper dns entries.',
      true,
      'host_unknown',
      'hard',
    ],
    // IMail: the mailbox, not the message, is over its size
    ['User mailbox exceeds allowed size: jane@example.org', true, 'mailbox_full', 'soft'],
    // vpopmail's vdelivermail
    ['vdelivermail: account is locked email bounced', true, 'suspended', 'soft'],
    // Postfix's "delivery temporarily suspended" is about the destination host, not the mailbox
    [
      'delivery temporarily suspended: connect to mx.example.org[192.0.2.25]:25: Connection refused',
      false,
      'network_error',
      'soft',
    ],
    // OpenSMTPD
    ['jane@example.org: Envelope expired', true, 'expired', 'soft'],
    [
      'jane@example.org: Network error on destination MXs Please note that this is only a temporary failure report.',
      false,
      'network_error',
      'soft',
    ],
    // DragonFly, Yahoo (qmail), X3, au EZweb: gave up after retrying
    ['Could not deliver for the last 432000 seconds. Giving up.', true, 'expired', 'soft'],
    // Exim, for a message older than its retry rules allow
    [
      'all hosts have been failing for a long time and were last tried after this message arrived',
      true,
      'expired',
      'soft',
    ],
    ['Unable to deliver message after multiple retries, giving up.', true, 'expired', 'soft'],
    [
      'Delivery to the following recipients was aborted after 5.0 hour(s): jane@example.org',
      true,
      'expired',
      'soft',
    ],
    [
      'Your message was not delivered within 0 days and 1 hours. Remote host is not responding.',
      true,
      'expired',
      'soft',
    ],
    // Gmail's preamble is not the recipient's filter; the reply it quotes names the cause
    [
      'Google tried to deliver your message, but it was rejected by the recipient domain. We recommend contacting the other email provider for further information about the cause of this error. The error that the other server returned was: 554 554 5.7.1 Service unavailable; Client host [192.0.2.10] blocked using zen.example.net (state 13).',
      true,
      'blocked',
      'soft',
    ],
    // Exchange Online at DATA, having refused every recipient: not proof about this one
    ['550 5.4.1 All recipient addresses rejected : Access denied [mx.example.org]', true, 'rejected', 'soft'],
    // A URI blocklist judges the message's links, not the sending IP
    [
      '550-REJECTED - Blacklisted URL in message. (example.com) in [black]. 550-See http://lookup.example.com.',
      true,
      'spam',
      'soft',
    ],
    // Google Workspace groups: a spam verdict, then advice about SPF
    [
      'Your email to group jane@example.org was rejected due to spam classification. To address this issue: * Set up SPF records for your sending domain if you have not done so already.',
      true,
      'spam',
      'soft',
    ],
    // Gmail: a malformed message, refused "to reduce the amount of spam"
    [
      '550-5.7.1 This message is not RFC 5322 compliant. There are multiple Subject 550-5.7.1 headers. To reduce the amount of spam sent to Gmail, this message has 550-5.7.1 been blocked.',
      true,
      'policy',
      'soft',
    ],
  ] as const)('%s (final: %s) → %s %s', (diagnostic, permanent, category, type) => {
    expect(classifyFailure({ diagnostic, permanent })).toMatchObject({ category, type });
  });
});

describe('categoryOfStatus', () => {
  it.each([
    ['5.1.1', 'user_unknown'],
    ['5.1.2', 'host_unknown'],
    ['5.1.6', 'has_moved'],
    ['5.1.10', 'host_unknown'],
    ['4.1.10', 'network_error'],
    ['5.2.1', 'suspended'],
    ['5.2.2', 'mailbox_full'],
    ['4.2.2', 'mailbox_full'],
    ['5.3.4', 'message_too_big'],
    ['5.4.4', 'host_unknown'],
    ['4.4.4', 'network_error'],
    ['4.4.7', 'expired'],
    ['5.7.1', null],
    ['5.7.0', null],
    ['5.0.0', null],
    ['5.7.23', 'auth_failure'],
    ['5.7.25', 'blocked'],
    ['5.7.26', 'auth_failure'],
    ['5.7.27', 'rejected'],
    ['5.7.650', 'blocked'],
    ['2.0.0', null],
    ['9.9.9', null],
    [null, null],
  ] as const)('%s → %s', (status, category) => {
    expect(categoryOfStatus(status)).toBe(category);
  });

  it('only names categories of product.md §9', () => {
    for (let subject = 0; subject < 8; subject += 1)
      for (let detail = 0; detail < 800; detail += 1) {
        const category = categoryOfStatus(`5.${subject}.${detail}`);
        if (category !== null) expect(BOUNCE_CATEGORIES).toContain(category);
      }
  });
});

describe('smtpCommandIn', () => {
  it.each([
    ['host mx.example.org[192.0.2.25] said: 550 5.1.1 user unknown (in reply to rcpt to command)', 'RCPT'],
    ['smtp error from remote mail server after end of data:', 'DATA'],
    ['smtp error from remote mail server after mail from:<orders@shop.example.com> size=1543:', 'MAIL'],
    ['mx.example.org [192.0.2.25] did not like our final data:', 'DATA'],
    ['192.0.2.25 does not like recipient.', 'RCPT'],
    ['... while talking to mx.example.org.: >>> data <<< 550 5.1.1 user unknown', 'DATA'],
    [
      'conversation with mx.example.org[192.0.2.25] timed out while receiving the initial server greeting',
      'CONN',
    ],
    ['550 5.1.1 user unknown', null],
  ] as const)('%s → %s', (text, command) => {
    expect(smtpCommandIn(text)).toBe(command);
  });
});
