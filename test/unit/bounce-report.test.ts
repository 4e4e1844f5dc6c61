import { describe, it, expect } from 'vitest';
import { enhancedStatusIn } from '../../src/domain/bounce/status-codes.js';
import {
  bounceSeverity,
  parseDeliveryStatus,
  parseReport,
  type BounceRecipient,
  type FeedbackReport,
} from '../../src/bounces/report.js';
import { loadBounceFixture, type BounceFixture } from '../fixtures/bounces/load.js';

const JANE = 'jane@example.org';
const USER_UNKNOWN =
  '550 5.1.1 <jane@example.org>: Recipient address rejected: User unknown in virtual mailbox table';

function failed(
  status: string,
  diagnostic: string,
  verdict: Pick<BounceRecipient, 'category' | 'type' | 'replyCode'>,
): BounceRecipient {
  return { recipient: JANE, action: 'failed', status, diagnostic, ...verdict };
}
const HARD_USER_UNKNOWN = { category: 'user_unknown', type: 'hard', replyCode: 550 } as const;

const expected: Record<BounceFixture, FeedbackReport> = {
  'postfix-dsn': {
    kind: 'bounce',
    recipients: [failed('5.1.1', USER_UNKNOWN, HARD_USER_UNKNOWN)],
    originalMessageId: 'req_fixture1@shop.example.com',
  },
  'arf-complaint': {
    kind: 'complaint',
    feedbackType: 'abuse',
    recipient: JANE,
    originalMessageId: 'req_fixture2@shop.example.com',
  },
  'dsn-no-original': {
    kind: 'bounce',
    recipients: [
      failed('5.2.1', '552 5.2.1 Mailbox disabled for this recipient', {
        category: 'suspended',
        type: 'soft',
        replyCode: 552,
      }),
    ],
    originalMessageId: null,
  },
  'dsn-with-headers-only': {
    kind: 'bounce',
    recipients: [failed('5.1.1', '550 5.1.1 <jane@example.org>... User unknown', HARD_USER_UNKNOWN)],
    originalMessageId: 'req_fixture4@shop.example.com',
  },
  'dsn-delayed': {
    kind: 'bounce',
    recipients: [
      {
        recipient: JANE,
        action: 'delayed',
        status: '4.4.7',
        diagnostic:
          'conversation with mx.example.org[192.0.2.25] timed out while receiving the initial server greeting',
        category: 'network_error',
        type: 'soft',
        replyCode: null,
      },
    ],
    originalMessageId: 'req_fixture5@shop.example.com',
  },
  'dsn-policy': {
    kind: 'bounce',
    recipients: [
      failed(
        '5.7.1',
        '550 5.7.1 Service unavailable; client [192.0.2.10] blocked using a policy list of example.org',
        { category: 'blocked', type: 'soft', replyCode: 550 },
      ),
    ],
    originalMessageId: 'req_fixture6@shop.example.com',
  },
  'exim-bounce': {
    kind: 'bounce',
    recipients: [failed('5.1.1', USER_UNKNOWN, HARD_USER_UNKNOWN)],
    originalMessageId: 'req_fixture7@shop.example.com',
  },
  'not-a-report': { kind: 'unknown' },
};

/**
 * What the intake will decide from each fixture's first recipient: [severity, suppress]. A
 * disabled mailbox (5.2.1) fails the message but is `suspended`, not proof of a bad address.
 */
const decisions: Partial<Record<BounceFixture, [ReturnType<typeof bounceSeverity>, boolean]>> = {
  'postfix-dsn': ['hard', true],
  'dsn-no-original': ['hard', false],
  'dsn-with-headers-only': ['hard', true],
  'dsn-delayed': ['soft', false],
  'dsn-policy': ['hard', false],
  'exim-bounce': ['hard', true],
};

function fixtureText(name: BounceFixture): string {
  return loadBounceFixture(name).toString('utf8');
}

async function parseText(text: string): Promise<FeedbackReport> {
  return parseReport(Buffer.from(text, 'utf8'));
}

describe('parseReport on the fixtures', () => {
  it.each(Object.keys(expected) as BounceFixture[])('%s', async (name) => {
    expect(await parseReport(loadBounceFixture(name))).toEqual(expected[name]);
  });

  it.each(Object.entries(decisions) as [BounceFixture, [string | null, boolean]][])(
    '%s: severity and suppression',
    async (name, [severity, suppress]) => {
      const report = await parseReport(loadBounceFixture(name));
      if (report.kind !== 'bounce') throw new Error(`${name} is not a bounce`);
      const [recipient] = report.recipients;
      expect(bounceSeverity(recipient!)).toBe(severity);
      expect(recipient!.type === 'hard').toBe(suppress);
    },
  );

  it('returns the substituted values, whatever they are', async () => {
    const values = {
      tokenAddress: 'bounces+2n9c-2ci2tfogwn6b2pxa@bounces.example.com',
      messageId: '0193a5e2-7b1c-7cc0-9d1e-4f5a6b7c8d9e@herald.example.com',
      recipient: 'Jane.Doe+orders@Example.ORG',
    };
    for (const name of ['postfix-dsn', 'exim-bounce', 'dsn-with-headers-only'] as const) {
      const report = await parseReport(loadBounceFixture(name, values));
      expect(report).toMatchObject({ kind: 'bounce', originalMessageId: values.messageId });
      if (report.kind === 'bounce') expect(report.recipients[0]?.recipient).toBe(values.recipient);
    }
    expect(await parseReport(loadBounceFixture('arf-complaint', values))).toMatchObject({
      recipient: values.recipient,
      originalMessageId: values.messageId,
    });
  });

  it('reads the fixtures with bare LF line endings too', async () => {
    const lf = fixtureText('postfix-dsn').replace(/\r\n/g, '\n');
    expect(await parseText(lf)).toEqual(expected['postfix-dsn']);
  });
});

describe('parseReport on variations', () => {
  it('decodes a base64 delivery-status part', async () => {
    const text = fixtureText('dsn-no-original');
    const [head, rest] = splitAt(text, 'Content-Type: message/delivery-status\r\n\r\n');
    const [body, tail] = splitAt(rest, '\r\n--5AH9TQ021188');
    const encoded = Buffer.from(body).toString('base64').replace(/.{76}/g, '$&\r\n');
    const report = await parseText(
      `${head.replace(/\r\n\r\n$/, '')}\r\nContent-Transfer-Encoding: base64\r\n\r\n${encoded}\r\n--5AH9TQ021188${tail}`,
    );
    expect(report).toEqual(expected['dsn-no-original']);
  });

  it('takes the complaining recipient from the original To when Original-Rcpt-To is absent', async () => {
    const text = fixtureText('arf-complaint').replace(/Original-Rcpt-To: .*\r\n/, '');
    expect(await parseText(text)).toMatchObject({ kind: 'complaint', recipient: JANE });
    const named = text.replace(`To: ${JANE}\r\n`, `To: "Doe, Jane" <${JANE}>\r\n`);
    expect(await parseText(named)).toMatchObject({ recipient: JANE });
  });

  it('has no recipient when the feedback loop redacted it', async () => {
    const text = fixtureText('arf-complaint')
      .replace(/Original-Rcpt-To: .*\r\n/, '')
      .replace(`To: ${JANE}\r\n`, 'To: redacted\r\n');
    expect(await parseText(text)).toMatchObject({ kind: 'complaint', recipient: null });
  });

  it('reads other feedback types, lowercased', async () => {
    const text = fixtureText('arf-complaint').replace('Feedback-Type: abuse', 'Feedback-Type: Not-Spam');
    expect(await parseText(text)).toMatchObject({ kind: 'complaint', feedbackType: 'not-spam' });
  });

  it('keeps no NUL or lone surrogate of a report, and only the code of a status', async () => {
    // Anyone can send this to the bounce address: a NUL reaching PostgreSQL fails the statement.
    const ses = JSON.stringify({
      notificationType: 'Bounce',
      mail: { commonHeaders: { messageId: 'x\u0000@shop.example' } },
      bounce: {
        bouncedRecipients: [
          { emailAddress: 'v\ud800@x.example', status: `5.1.1\u0000<img>${'x'.repeat(500)}` },
        ],
      },
    });
    expect(
      await parseText(`From: a@example.net\r\nContent-Type: text/plain\r\n\r\n${ses}\r\n`),
    ).toMatchObject({
      kind: 'bounce',
      originalMessageId: 'x@shop.example',
      recipients: [{ recipient: 'v\ufffd@x.example', status: '5.1.1' }],
    });
    const arf = fixtureText('arf-complaint').replace('Feedback-Type: abuse', 'Feedback-Type: ab\u0000use');
    expect(await parseText(arf)).toMatchObject({ kind: 'complaint', feedbackType: 'abuse' });
    // What is read is what is stored: the action decides the severity as it is kept.
    const dsn = fixtureText('postfix-dsn').replace('Action: failed', 'Action: fail\u0000ed');
    expect(await parseText(dsn)).toEqual(expected['postfix-dsn']);
  });

  it('does not take a feedback report without Feedback-Type (RFC 5965 §3.1)', async () => {
    const text = fixtureText('arf-complaint').replace('Feedback-Type: abuse\r\n', '');
    expect(await parseText(text)).toEqual({ kind: 'unknown' });
  });

  it('reads an unbracketed Message-ID, as in the RFC 5965 example', async () => {
    const text = fixtureText('arf-complaint').replace(
      'Message-ID: <req_fixture2@shop.example.com>',
      'Message-ID: 8787KJKJ3K4J3K4J3K4J3.mail@example.net',
    );
    expect(await parseText(text)).toMatchObject({
      originalMessageId: '8787KJKJ3K4J3K4J3K4J3.mail@example.net',
    });
  });

  it('ignores a report forwarded inside an ordinary message', async () => {
    const inner = fixtureText('postfix-dsn');
    const forwarded = [
      'From: Jane Doe <jane@example.org>',
      'To: bounces@bounces.example.com',
      'Subject: Fwd: Undelivered Mail Returned to Sender',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="fwd"',
      '',
      '--fwd',
      'Content-Type: text/plain',
      '',
      'Look at this.',
      '--fwd',
      'Content-Type: message/rfc822',
      'Content-Disposition: inline',
      '',
      inner,
      '--fwd--',
      '',
    ].join('\r\n');
    expect(await parseText(forwarded)).toEqual({ kind: 'unknown' });
  });

  it('reads an Exim bounce listing several addresses, each with its own error', async () => {
    const text = fixtureText('exim-bounce').replace(
      '\r\n\r\n------ This is a copy',
      [
        '',
        '  john@example.com',
        '    host mx.example.com [192.0.2.26]',
        '    SMTP error from remote mail server after RCPT TO:<john@example.com>:',
        '    552 5.2.2 <john@example.com>: Mailbox full',
        '  nobody@example.net',
        '    Unrouteable address',
        '',
        '------ This is a copy',
      ].join('\r\n'),
    );
    const report = await parseText(text);
    expect(report).toMatchObject({ kind: 'bounce', originalMessageId: 'req_fixture7@shop.example.com' });
    expect(report.kind === 'bounce' && report.recipients).toEqual([
      failed('5.1.1', USER_UNKNOWN, HARD_USER_UNKNOWN),
      {
        recipient: 'john@example.com',
        action: 'failed',
        status: '5.2.2',
        diagnostic: '552 5.2.2 <john@example.com>: Mailbox full',
        category: 'mailbox_full',
        type: 'soft',
        replyCode: 552,
      },
      {
        recipient: 'nobody@example.net',
        action: 'failed',
        status: null,
        diagnostic: 'Unrouteable address',
        category: 'host_unknown',
        type: 'hard',
        replyCode: null,
      },
    ]);
  });

  it('does not take Exim-like text that lacks the sentence, the list, or the Mailer-Daemon sender', async () => {
    const exim = fixtureText('exim-bounce');
    const variants = [
      exim.replace('could not be delivered to one or more of its', 'was delivered to all of its'),
      exim.replace('The following address(es) failed:', 'The addresses were:'),
      exim.replace(
        'From: Mail Delivery System <Mailer-Daemon@mx.example.com>',
        'From: Jane <jane@example.org>',
      ),
      exim.replace('Subject:', 'Content-Type: text/html\r\nSubject:'),
      exim.replace(/\r\n {2}jane@example\.org\r\n/, '\r\n'),
    ];
    for (const variant of variants) expect(await parseText(variant)).toEqual({ kind: 'unknown' });
  });

  it('reads no action from an Exim bounce that does not call the error permanent', async () => {
    const text = fixtureText('exim-bounce').replace(' This is a permanent error.', '');
    const report = await parseText(text);
    expect(report.kind === 'bounce' && report.recipients[0]?.action).toBeNull();
    expect(report.kind === 'bounce' && bounceSeverity(report.recipients[0]!)).toBe('hard');
  });

  it.each([
    ['empty input', ''],
    ['headers only', 'From: a@example.org\r\nSubject: hi\r\n'],
    [
      'a broken multipart',
      'Content-Type: multipart/report; boundary=x\r\n\r\n--x\r\nContent-Type: message/delivery-status\r\n',
    ],
  ])('gives unknown or an empty bounce for %s', async (_name, text) => {
    const report = await parseText(text);
    if (report.kind === 'bounce') expect(report.recipients).toEqual([]);
    else expect(report).toEqual({ kind: 'unknown' });
  });
});

describe('parseDeliveryStatus', () => {
  const perMessage = 'Reporting-MTA: dns; mail.example.com\nArrival-Date: Mon, 17 Nov 2025 10:15:01 +0000\n';
  const FAILED_5_1_1: BounceRecipient = {
    recipient: JANE,
    action: 'failed',
    status: '5.1.1',
    diagnostic: null,
    category: 'user_unknown',
    type: 'hard',
    replyCode: null,
  };

  it('reads one block per recipient after the per-message block (RFC 3464 §2.1)', () => {
    const text = [
      perMessage,
      'Final-Recipient: rfc822; jane@example.org\nAction: failed\nStatus: 5.1.1\n',
      'Final-Recipient: rfc822; john@example.com\nAction: delayed\nStatus: 4.2.2\n',
      'Final-Recipient: rfc822; joe@example.net\nAction: delivered\nStatus: 2.0.0\n',
    ].join('\n');
    expect(parseDeliveryStatus(text).recipients).toEqual([
      { ...FAILED_5_1_1 },
      {
        recipient: 'john@example.com',
        action: 'delayed',
        status: '4.2.2',
        diagnostic: null,
        category: 'mailbox_full',
        type: 'soft',
        replyCode: null,
      },
      {
        recipient: 'joe@example.net',
        action: 'delivered',
        status: '2.0.0',
        diagnostic: null,
        category: 'other',
        type: 'soft',
        replyCode: null,
      },
    ]);
  });

  it('unfolds fields, strips types and brackets, and reads CRLF and extra blank lines', () => {
    const text = [
      perMessage,
      '',
      'final-recipient:RFC822;<jane@example.org>',
      'ACTION: Failed',
      'Status: 5.0.0 (permanent failure)',
      'Diagnostic-Code: smtp;550-5.1.1 The email account that you tried to reach does',
      '\tnot exist.   Please try',
      "    double-checking the recipient's email address",
      '',
    ].join('\r\n');
    expect(parseDeliveryStatus(text).recipients).toEqual([
      {
        recipient: JANE,
        action: 'failed',
        status: '5.0.0',
        diagnostic:
          "550-5.1.1 The email account that you tried to reach does not exist. Please try double-checking the recipient's email address",
        category: 'user_unknown',
        type: 'hard',
        replyCode: 550,
      },
    ]);
  });

  it('falls back to Original-Recipient, and to the status in the diagnostic', () => {
    const text = `${perMessage}\nOriginal-Recipient: rfc822;jane@example.org\nAction: failed\nDiagnostic-Code: smtp; 550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup\n`;
    expect(parseDeliveryStatus(text).recipients).toEqual([
      {
        recipient: JANE,
        action: 'failed',
        status: '5.1.10',
        diagnostic: '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup',
        ...HARD_USER_UNKNOWN,
      },
    ]);
  });

  it('reads a recipient block even without the blank line after the per-message block', () => {
    const text = `${perMessage}Final-Recipient: rfc822; jane@example.org\nAction: failed\nStatus: 5.1.1\n`;
    expect(parseDeliveryStatus(text).recipients).toEqual([FAILED_5_1_1]);
  });

  it('nulls what is absent or not in the vocabulary', () => {
    const text = `${perMessage}\nFinal-Recipient: rfc822;\nAction: bounced\nStatus: 9.9.9\nDiagnostic-Code: smtp;   \n`;
    expect(parseDeliveryStatus(text).recipients).toEqual([
      {
        recipient: null,
        action: null,
        status: null,
        diagnostic: null,
        category: 'other',
        type: 'soft',
        replyCode: null,
      },
    ]);
  });

  it('clips the diagnostic to 500 characters', () => {
    const text = `${perMessage}\nFinal-Recipient: rfc822; jane@example.org\nAction: failed\nDiagnostic-Code: smtp; 550 ${'x'.repeat(2000)}\n`;
    const [recipient] = parseDeliveryStatus(text).recipients;
    expect(recipient?.diagnostic).toHaveLength(500);
  });

  it('finds no recipients in a per-message block alone, or in nothing', () => {
    expect(parseDeliveryStatus(perMessage).recipients).toEqual([]);
    expect(parseDeliveryStatus('').recipients).toEqual([]);
  });
});

describe('bounceSeverity', () => {
  const recipient = (action: string | null, status: string | null): BounceRecipient => ({
    recipient: JANE,
    action,
    status,
    diagnostic: null,
    category: 'other',
    type: 'soft',
    replyCode: null,
  });

  it.each([
    ['failed', '5.1.1', 'hard'],
    ['failed', '4.4.1', 'hard'], // given up after retrying: the message is lost
    ['failed', null, 'hard'],
    ['delayed', '4.4.7', 'soft'],
    ['delayed', null, 'soft'],
    ['delivered', '2.0.0', null],
    ['relayed', '2.0.0', null],
    ['expanded', '2.0.0', null],
    [null, '5.1.1', 'hard'],
    [null, '4.2.2', 'soft'],
    [null, '2.0.0', null],
    [null, null, null],
  ] as const)('action %s, status %s → %s', (action, status, severity) => {
    expect(bounceSeverity(recipient(action, status))).toBe(severity);
  });
});

describe('enhancedStatusIn', () => {
  it.each([
    ['550 5.1.1 <jane@example.org>: Recipient address rejected', '5.1.1'],
    ['421 4.7.0 Try again later, closing connection.', '4.7.0'],
    ['250 2.0.0 Ok: queued as 4dB7qK0x3Vz9sWb', '2.0.0'],
    ['550 5.1.10 RESOLVER.ADR.RecipientNotFound', '5.1.10'],
    ['550-5.1.1 The email account that you tried to reach does not exist.', '5.1.1'],
    ['#550 5.2.1 mailbox disabled ##', '5.2.1'],
    ['status 5.7.1.', '5.7.1'],
    ['(5.4.7)', '5.4.7'],
    ['5.1.1', '5.1.1'],
    ['550 User unknown', null],
    ['', null],
    ['host mx.example.org [192.0.2.1] said: 550 no such user', null],
    ['192.5.1.1', null],
    ['client 10.4.4.7 refused', null],
    ['version 1.2.3.4', null],
    ['libmilter 2.1.3.4', null],
    ['v5.1.1', null],
    ['5.1.1000', null],
    ['5.1.1a', null],
    ['6.1.1', null],
    ['5.1', null],
    ['connect to 192.0.2.1: 4.4.1 timed out', '4.4.1'],
  ])('%j → %s', (text, status) => {
    expect(enhancedStatusIn(text)).toBe(status);
  });
});

function splitAt(text: string, marker: string): [string, string] {
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`marker not found: ${marker}`);
  return [text.slice(0, at + marker.length), text.slice(at + marker.length)];
}
