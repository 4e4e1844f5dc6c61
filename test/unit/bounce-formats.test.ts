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
};

describe('the format families', () => {
  it.each(Object.entries(bounces) as [FormatFixture, readonly [string, string, string | null]][])(
    '%s → %o',
    async (name, [category, type, status]) => {
      const report = await parseReport(loadBounceFixture(name));
      expect(report).toMatchObject({
        kind: 'bounce',
        originalMessageId: defaultBounceFixtureValues(name).messageId,
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

  it('does not read an SES delivery notification as a report', async () => {
    const text = loadBounceFixture('amazon-ses-bounce').toString('utf8').replace('"Bounce"', '"Delivery"');
    expect(await parseReport(Buffer.from(text))).toEqual({ kind: 'unknown' });
  });
});
