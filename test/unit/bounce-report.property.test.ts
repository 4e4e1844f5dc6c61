import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { parseDeliveryStatus, parseReport } from '../../src/bounces/report.js';
import { enhancedStatusIn } from '../../src/domain/bounce/status-codes.js';
import { BOUNCE_FIXTURES, loadBounceFixture } from '../fixtures/bounces/load.js';

const RUNS = { numRuns: 200 };
const STATUS_SHAPE = /^[245]\.\d{1,3}\.\d{1,3}$/;

const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc.string({ unit: 'grapheme', maxLength: 100 }),
  fc.stringMatching(/^[A-Za-z:; \t\r\n0-9.<>@-]{0,300}$/),
);

/** Text built from the pieces of a delivery-status body, in any order, so the parser's branches are reached. */
const dsnLike = fc
  .array(
    fc.oneof(
      fc.constantFrom(
        'Final-Recipient: rfc822; jane@example.org',
        'Original-Recipient: rfc822;',
        'Action: failed',
        'Action:',
        'Status: 5.1.1',
        'Status: 5.',
        'Diagnostic-Code: smtp; 550 5.1.1 <jane@example.org>',
        'Diagnostic-Code:',
        'Reporting-MTA: dns; mail.example.com',
        '',
        ' ',
        '\t continued',
        ':',
        ';',
      ),
      anyText,
    ),
    { maxLength: 30 },
  )
  .chain((lines) => fc.constantFrom('\n', '\r\n', '\r').map((eol) => lines.join(eol)));

describe('parseDeliveryStatus', () => {
  it('never throws, and gives well-formed recipients, on any text', () => {
    fc.assert(
      fc.property(fc.oneof(anyText, dsnLike), (text) => {
        for (const recipient of parseDeliveryStatus(text).recipients) {
          if (recipient.status !== null) expect(recipient.status).toMatch(STATUS_SHAPE);
          if (recipient.diagnostic !== null) expect(recipient.diagnostic.length).toBeLessThanOrEqual(500);
          if (recipient.action !== null) {
            expect(['failed', 'delayed', 'delivered', 'relayed', 'expanded']).toContain(recipient.action);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('reads back what a report generator wrote, however its fields are folded', () => {
    const recipient = fc.record({
      address: fc.emailAddress(),
      action: fc.constantFrom('failed', 'delayed', 'delivered', 'relayed', 'expanded'),
      status: fc.tuple(fc.constantFrom(2, 4, 5), fc.nat(999), fc.nat(999)).map((parts) => parts.join('.')),
      words: fc.array(fc.stringMatching(/^[!-~]{1,12}$/), { minLength: 1, maxLength: 12 }),
      folds: fc.array(fc.boolean(), { maxLength: 12 }),
    });
    fc.assert(
      fc.property(
        fc.array(recipient, { minLength: 1, maxLength: 5 }),
        fc.constantFrom('\n', '\r\n'),
        (rs, eol) => {
          const blocks = rs.map(({ address, action, status, words, folds }) => {
            const diagnostic = words.map((word, i) => (folds[i] ? `${eol}\t${word}` : ` ${word}`)).join('');
            return [
              `Final-Recipient: rfc822; ${address}`,
              `Action: ${action}`,
              `Status: ${status}`,
              `Diagnostic-Code: smtp;${diagnostic}`,
            ].join(eol);
          });
          const text = ['Reporting-MTA: dns; mail.example.com', ...blocks].join(eol + eol) + eol;
          expect(parseDeliveryStatus(text).recipients).toEqual(
            rs.map(({ address, action, status, words }) =>
              expect.objectContaining({
                recipient: address,
                action,
                status,
                diagnostic: words.join(' ').slice(0, 500).trim(),
              }),
            ),
          );
        },
      ),
      RUNS,
    );
  });
});

describe('enhancedStatusIn', () => {
  it('never throws, and returns only a well-formed code found in the text', () => {
    fc.assert(
      fc.property(fc.oneof(anyText, fc.stringMatching(/^[0-9. a-z-]{0,40}$/)), (text) => {
        const status = enhancedStatusIn(text);
        if (status !== null) {
          expect(status).toMatch(STATUS_SHAPE);
          expect(text).toContain(status);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('never reads a code out of an IPv4 address', () => {
    const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((parts) => parts.join('.'));
    fc.assert(
      fc.property(ipv4, fc.constantFrom('', '[', '(', ' '), (ip, open) => {
        expect(enhancedStatusIn(`host mx.example.org ${open}${ip}`)).toBeNull();
      }),
      RUNS,
    );
  });
});

describe('parseReport', () => {
  it('resolves on any bytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2000 }), async (bytes) => {
        const report = await parseReport(Buffer.from(bytes));
        expect(['bounce', 'complaint', 'unknown']).toContain(report.kind);
      }),
      RUNS,
    );
  });

  const fixture = fc.constantFrom(...BOUNCE_FIXTURES).map((name) => loadBounceFixture(name));

  it('resolves on fixtures cut short at any point', async () => {
    await fc.assert(
      fc.asyncProperty(fixture, fc.double({ min: 0, max: 1, noNaN: true }), async (raw, at) => {
        const report = await parseReport(raw.subarray(0, Math.floor(raw.length * at)));
        expect(['bounce', 'complaint', 'unknown']).toContain(report.kind);
      }),
      RUNS,
    );
  });

  it('resolves on fixtures with random bytes spliced in', async () => {
    const splice = fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      remove: fc.nat(40),
      insert: fc.oneof(
        fc.uint8Array({ maxLength: 60 }),
        fc
          .constantFrom(
            '\r\n\r\n',
            '\r\n--',
            '\r\nContent-Type: multipart/report; boundary=x\r\n',
            '=?utf-8?B?',
            '\u0000',
          )
          .map((text) => new Uint8Array(Buffer.from(text, 'utf8'))),
      ),
    });
    await fc.assert(
      fc.asyncProperty(fixture, fc.array(splice, { minLength: 1, maxLength: 4 }), async (raw, splices) => {
        let bytes = raw;
        for (const { at, remove, insert } of splices) {
          const i = Math.floor(bytes.length * at);
          bytes = Buffer.concat([bytes.subarray(0, i), insert, bytes.subarray(i + remove)]);
        }
        const report = await parseReport(bytes);
        expect(['bounce', 'complaint', 'unknown']).toContain(report.kind);
      }),
      RUNS,
    );
  });
});
