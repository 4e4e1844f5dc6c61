import { describe, it, expect } from 'vitest';
import { parseReport, type FeedbackReport } from '../../src/bounces/report.js';
import {
  defaultBounceFixtureValues,
  FORMAT_FIXTURES,
  loadBounceFixture,
  type FormatFixture,
} from '../fixtures/bounces/load.js';

const JANE = 'jane@example.org';

/** What each family's fixture (test/fixtures/bounces/README.md) must read as: [category, type, status]. */
const bounces: Partial<Record<FormatFixture, readonly [string, 'hard' | 'soft', string | null]>> = {
  'qmail-failure': ['user_unknown', 'hard', '5.1.1'],
  'sendmail-prose': ['mailbox_full', 'soft', '5.2.2'],
  'office365-ndr': ['user_unknown', 'hard', '5.1.10'],
  'gmail-prose': ['auth_failure', 'soft', '5.7.26'],
  'yahoo-failure': ['user_unknown', 'hard', null],
  'domino-failure': ['user_unknown', 'hard', null],
  'dragonfly-blocked': ['blocked', 'soft', '5.7.1'],
  'amazon-ses-bounce': ['mailbox_full', 'soft', '5.2.2'],
  'mcafee-gateway': ['user_unknown', 'hard', null],
  'messagelabs-failure': ['user_unknown', 'hard', '5.0.0'],
  'verizon-sms': ['user_unknown', 'hard', null],
  'ezweb-disabled': ['suspended', 'soft', '5.0.0'],
  'exim-cpanel-unroutable': ['host_unknown', 'hard', null],
  'sendmail-mail-local': ['user_unknown', 'hard', '5.5.0'],
  'google-groups-refusal': ['rejected', 'soft', null],
};

/** Verizon's SMS gateway returns no part of the original, so nothing names its Message-ID. */
const NO_ORIGINAL: ReadonlySet<FormatFixture> = new Set(['verizon-sms']);

describe('the format families', () => {
  it.each(Object.entries(bounces) as [FormatFixture, readonly [string, string, string | null]][])(
    '%s → %o',
    async (name, [category, type, status]) => {
      const report = await parseReport(loadBounceFixture(name));
      expect(report).toMatchObject({
        kind: 'bounce',
        originalMessageId: NO_ORIGINAL.has(name) ? null : defaultBounceFixtureValues(name).messageId,
      });
      const recipients = (report as Extract<FeedbackReport, { kind: 'bounce' }>).recipients;
      expect(recipients).toHaveLength(1);
      expect(recipients[0]).toMatchObject({ recipient: JANE, action: 'failed', category, type, status });
      expect(recipients[0]!.diagnostic?.length).toBeGreaterThan(0);
    },
  );

  it('reads a Microsoft JMRP report as a complaint', async () => {
    expect(await parseReport(loadBounceFixture('jmrp-complaint'))).toEqual({
      kind: 'complaint',
      feedbackType: 'abuse',
      recipient: JANE,
      originalMessageId: defaultBounceFixtureValues('jmrp-complaint').messageId,
    });
  });

  it('finds the recipient, whatever it is, in every family', async () => {
    const recipient = 'Jane.Doe+orders@Example.ORG';
    for (const name of FORMAT_FIXTURES) {
      const report = await parseReport(loadBounceFixture(name, { recipient }));
      const found =
        report.kind === 'bounce'
          ? report.recipients[0]?.recipient
          : report.kind === 'complaint'
            ? report.recipient
            : null;
      expect(found, name).toBe(recipient);
    }
  });

  it('reads a delay warning as transient, never hard', async () => {
    const text = loadBounceFixture('qmail-failure')
      .toString('utf8')
      .replace('Subject: failure notice', 'Subject: Delivery delayed: warning')
      .replace("This is a permanent error; I've given up.", 'This is only a warning; I will keep trying.');
    const report = await parseReport(Buffer.from(text));
    expect(report).toMatchObject({ kind: 'bounce' });
    if (report.kind === 'bounce')
      expect(report.recipients[0]).toMatchObject({ action: 'delayed', type: 'soft' });
  });

  it("reads Exim's notice to an errors_to address as final, though it never says permanent", async () => {
    const text = loadBounceFixture('exim-bounce')
      .toString('utf8')
      .replace(
        'A message that you sent could not be delivered to one or more of its\r\nrecipients. This is a permanent error. The following address(es) failed:',
        'A message sent by\r\n\r\n  <orders@shop.example.com>\r\n\r\ncould not be delivered to one or more of its recipients. The following\r\naddress(es) failed:',
      );
    expect(text).toContain('A message sent by');
    const report = await parseReport(Buffer.from(text));
    expect(report).toMatchObject({ kind: 'bounce' });
    if (report.kind === 'bounce')
      expect(report.recipients[0]).toMatchObject({
        recipient: JANE,
        action: 'failed',
        category: 'user_unknown',
        type: 'hard',
      });
  });

  it('does not read an SES delivery notification as a report', async () => {
    const text = loadBounceFixture('amazon-ses-bounce').toString('utf8').replace('"Bounce"', '"Delivery"');
    expect(await parseReport(Buffer.from(text))).toEqual({ kind: 'unknown' });
  });

  /**
   * A system's own words count only in its own notices: the same fixture with the marks that name
   * the system taken out reads as the generic rules read it.
   */
  describe("a system's own words, only in its own notices", () => {
    async function lineOf(name: FormatFixture, edit: (text: string) => string) {
      const report = await parseReport(Buffer.from(edit(loadBounceFixture(name).toString('utf8'))));
      expect(report.kind).toBe('bounce');
      return (report as Extract<FeedbackReport, { kind: 'bounce' }>).recipients[0];
    }

    it('McAfee: "No such user" with no command is a filter\'s answer without X-NAI-Header', async () => {
      const line = await lineOf('mcafee-gateway', (text) => text.replace(/^X-NAI-Header: .*\r\n/m, ''));
      expect(line).toMatchObject({ category: 'rejected', type: 'soft' });
    });

    it('MessageLabs: "542 … Rejected" names no cause without its X-Msg-Ref', async () => {
      const line = await lineOf('messagelabs-failure', (text) => text.replace(/^X-Msg-Ref: .*\r\n/m, ''));
      expect(line).toMatchObject({ type: 'soft' });
      expect(line?.category).not.toBe('user_unknown');
    });

    it('Verizon: "no such user here" with no command is not proof from another sender', async () => {
      const line = await lineOf('verizon-sms', (text) =>
        text.replace('From: post_master@', 'From: postmaster@'),
      );
      expect(line).toMatchObject({ category: 'rejected', type: 'soft' });
    });

    it('EZweb: without its marks, "550 user unknown" at RCPT is an unknown user', async () => {
      const line = await lineOf('ezweb-disabled', (text) =>
        text.replace(/^Received: by lsean\.example\.net \(EZweb Mail\)\r\n.*\r\n/m, ''),
      );
      expect(line).toMatchObject({ category: 'user_unknown', type: 'hard' });
    });

    it('sendmail: without the local mailer\'s line, "Service unavailable" is a system error', async () => {
      const line = await lineOf('sendmail-mail-local', (text) => text.replace(/^mail\.local: .*\r\n/m, ''));
      expect(line).toMatchObject({ category: 'system_error', type: 'soft' });
    });

    it('Google Groups: its refusal in any language says nothing a phrase can read elsewhere', async () => {
      const line = await lineOf('google-groups-refusal', (text) =>
        text.replace(/^X-Google-Smtp-Source: .*\r\n/m, ''),
      );
      expect(line).toMatchObject({ recipient: JANE, category: 'other', type: 'soft' });
    });

    it('Google Groups: its signature in the returned message does not make a Gmail bounce its notice', async () => {
      const line = await lineOf('google-groups-refusal', (text) => {
        const head = text.slice(0, text.indexOf('\r\n\r\n'));
        const original = text
          .slice(text.indexOf('----- Original message -----'))
          .replace('Your order has shipped.', 'Google Groups: your order has shipped.');
        const notice =
          "** Address not found **\r\n\r\nYour message wasn't delivered to jane@example.org because the address couldn't be found.\r\n\r\n" +
          'The response was:\r\n\r\n550 5.1.1 The email account that you tried to reach does not exist.\r\n\r\n';
        return `${head}\r\n\r\n${notice}${original}`;
      });
      expect(line).toMatchObject({ recipient: JANE, category: 'user_unknown', type: 'hard' });
    });
  });
});
