import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { BOUNCE_CATEGORIES, HARD_CATEGORIES } from '../../src/domain/bounce/categories.js';
import { classifyFailure, classifyReply } from '../../src/domain/bounce/classify.js';
import type { ParsedMessage } from '../../src/domain/bounce/parsed-message.js';
import { readReport } from '../../src/domain/bounce/read-report.js';
import { unstorableText } from '../../src/domain/storable-text.js';

const RUNS = { numRuns: 300 };

/** Every string in `value`, however deep. */
function stringsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value !== 'object' || value === null) return [];
  return Object.values(value).flatMap(stringsOf);
}

/** Text made of the pieces real replies and bounces are made of, in any order, and of noise. */
const replyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc
    .array(
      fc.oneof(
        fc.constantFrom(
          '550',
          '5.1.1',
          '4.4.7',
          '5.7.1',
          '<jane@example.org>',
          'User unknown',
          'Mailbox full',
          'Recipient address rejected:',
          'in reply to RCPT TO command',
          'after end of data',
          '>>> DATA',
          'blocked using zen.example.net',
          'DMARC',
          'Requested action not taken: mailbox unavailable',
          '\r\n',
          '-',
          ' ',
        ),
        fc.string({ maxLength: 12 }),
      ),
      { maxLength: 25 },
    )
    .map((pieces) => pieces.join(' ')),
);

describe('classifyReply', () => {
  it('never throws, is deterministic, and gives a well-formed verdict', () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: -1, max: 1000 })),
        replyText,
        fc.option(fc.constantFrom('RCPT TO', 'MAIL FROM', 'DATA', 'EHLO', 'CONN', 'rcpt', 'QUIT', '')),
        (code, text, command) => {
          const reply = { code, text, command };
          const verdict = classifyReply(reply);
          expect(classifyReply(reply)).toEqual(verdict);
          expect(BOUNCE_CATEGORIES).toContain(verdict.category);
          expect(verdict.diagnostic.length).toBeLessThanOrEqual(500);
          if (verdict.status !== null) expect(verdict.status).toMatch(/^[245]\.\d{1,3}\.\d{1,3}$/);
          // Hard means a hard category and a permanent refusal (a 4xx never suppresses).
          if (verdict.type === 'hard') {
            expect(HARD_CATEGORIES.has(verdict.category)).toBe(true);
            expect(code === null || code >= 500 || code < 200).toBe(true);
          }
        },
      ),
      RUNS,
    );
  });

  it('survives inputs of the wrong type', () => {
    for (const bad of [null, undefined, 42, {}, { code: 'x', text: 5 }, { code: 550, text: null }])
      expect(() => classifyReply(bad as never)).not.toThrow();
  });
});

describe('classifyFailure', () => {
  it('never throws and is deterministic', () => {
    fc.assert(
      fc.property(
        replyText,
        fc.option(fc.string({ maxLength: 12 })),
        fc.option(fc.boolean()),
        (diagnostic, status, permanent) => {
          const facts = { diagnostic, status, permanent };
          expect(classifyFailure(facts)).toEqual(classifyFailure(facts));
        },
      ),
      RUNS,
    );
  });
});

const field = fc.record({
  name: fc.constantFrom('from', 'subject', 'to', 'x-failed-recipients', 'auto-submitted', 'content-type'),
  value: fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom('MAILER-DAEMON@example.org', 'Undelivered Mail Returned to Sender', 'auto-replied'),
  ),
});
const part = fc.record({
  contentType: fc.constantFrom(
    'message/delivery-status',
    'message/feedback-report',
    'message/rfc822',
    'text/rfc822-headers',
    'text/plain',
  ),
  text: fc.oneof(
    replyText,
    fc.constantFrom(
      'Final-Recipient: rfc822; jane@example.org\nAction: failed\nStatus: 5.1.1\n',
      'Final-Recipient: rfc822; ja\u0000ne@example.org\nAction: fail\ud800ed\nStatus: 5.1.1 (x\u0000)\n',
      'Message-ID: <a\u0000@example.org>\nTo: jane@example.org\n\nbody',
      'Feedback-Type: abuse\n',
      'Message-ID: <a@example.org>\nTo: jane@example.org\n\nbody',
    ),
  ),
});
const parsedMessage: fc.Arbitrary<ParsedMessage> = fc.record({
  headers: fc.array(field, { maxLength: 6 }),
  contentType: fc.constantFrom('text/plain', 'multipart/report', 'multipart/mixed'),
  text: fc.oneof(
    replyText,
    fc
      .array(
        fc.constantFrom(
          'This message was created automatically by mail delivery software.',
          'The following address(es) failed:',
          '  jane@example.org',
          '<jane@example.org>:',
          'Remote host said: 550 5.1.1 User unknown',
          '--- Below this line is a copy of the message.',
          'Received: from a',
          '',
          '{"notificationType":"Bounce","bounce":{"bouncedRecipients":[{"emailAddress":"jane@example.org"}]}}',
        ),
        { maxLength: 15 },
      )
      .map((lines) => lines.join('\n')),
  ),
  parts: fc.array(part, { maxLength: 3 }),
});

describe('readReport', () => {
  it('never throws, is deterministic, and gives well-formed reports on arbitrary messages', () => {
    fc.assert(
      fc.property(parsedMessage, (message) => {
        const report = readReport(message);
        expect(readReport(structuredClone(message))).toEqual(report);
        expect(['bounce', 'complaint', 'unknown']).toContain(report.kind);
        // Every word of it can be stored as it is read: no NUL, no lone surrogate.
        for (const text of stringsOf(report)) expect(unstorableText(text)).toBeNull();
        if (report.kind === 'bounce') {
          expect(report.recipients.length).toBeLessThanOrEqual(100);
          for (const recipient of report.recipients) {
            expect(BOUNCE_CATEGORIES).toContain(recipient.category);
            if (recipient.type === 'hard') expect(HARD_CATEGORIES.has(recipient.category)).toBe(true);
            if (recipient.status !== null) expect(recipient.status).toMatch(/^[245]\.\d{1,3}\.\d{1,3}$/);
          }
        }
      }),
      RUNS,
    );
  });
});
