import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { composeMessage, type OutgoingMessage } from '../../src/mail/mime.js';
import { skipSuite } from '../suites.js';

/**
 * A message with files must not look more like spam than the same message without them: Herald's
 * multipart/mixed, its base64 parts and RFC 2231 names are read by SpamAssassin (the Debian
 * `spamassassin` package, its shipped rules, local tests only: `-L`, no network) exactly as the
 * plain message is, rule for rule and point for point. Where SpamAssassin is not installed the
 * suite is skipped, loudly; in CI it must run.
 */

const SUITE = 'SpamAssassin';

interface Verdict {
  readonly score: number;
  /** The rules that fired, with their points. */
  readonly rules: readonly string[];
}

function spamAssassin(message: Buffer): Verdict | null {
  // -x: no user configuration is read or written; -t: the report with every rule that fired.
  const run = spawnSync('spamassassin', ['-L', '-t', '-x'], {
    input: message,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (run.error !== undefined) return null;
  const report = run.stdout.slice(run.stdout.indexOf('Content analysis details:'));
  const score = /Content analysis details:\s+\((-?[\d.]+) points/.exec(report);
  expect(score, run.stdout + run.stderr).not.toBeNull();
  const rules = [...report.matchAll(/^\s*(-?[\d.]+) ([A-Z0-9_]+)\s/gm)].map(
    ([, pts, rule]) => `${rule} ${pts}`,
  );
  return { score: Number(score![1]), rules: rules.sort() };
}

const plain: OutgoingMessage = {
  from: { name: 'Shop', address: 'no-reply@shop.example' },
  to: { name: 'Jane Doe', address: 'jane@example.org' },
  subject: 'Your invoice A-1',
  text: 'Hello Jane,\n\nyour invoice A-1 for November is attached.\n\nThank you for shopping with us.\n',
  html: '<p>Hello Jane,</p><p>your invoice <b>A-1</b> for November is attached.</p><p>Thank you for shopping with us.</p>',
  messageId: '0190a3c2-7b1e-7c4d-9f2a-3b5c6d7e8f90@shop.example',
  date: new Date('2026-11-27T09:00:00Z'),
  headers: { 'X-Herald-Request-Id': '0190a3c2-7b1e-7c4d-9f2a-3b5c6d7e8f90' },
};

const pdf = Buffer.concat([
  Buffer.from('%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n'),
  randomBytes(200 * 1024),
  Buffer.from('\n%%EOF\n'),
]);

describe('SpamAssassin reads a message with files as it reads the plain one', () => {
  it('fires the same rules with the same points', async (context) => {
    const alone = spamAssassin(await composeMessage(plain));
    if (alone === null) {
      if (process.env.CI)
        throw new Error('CI must run the SpamAssassin check: install the spamassassin package');
      return skipSuite(context, SUITE, 'spamassassin is not installed (Debian package spamassassin)');
    }
    const withFiles = spamAssassin(
      await composeMessage({
        ...plain,
        replyTo: { name: 'Billing', address: 'billing@shop.example' },
        attachments: [
          { filename: 'Invoice A-1.pdf', contentType: 'application/pdf', content: pdf },
          {
            filename: 'Reçu – novembre 2026.txt',
            contentType: 'text/plain; charset=utf-8',
            content: Buffer.from('Reçu\n'),
          },
          { filename: '請求書.csv', contentType: 'text/csv', content: Buffer.from('a,b\n1,2\n') },
        ],
      }),
    );
    expect(withFiles).toEqual(alone);
    expect(alone.score).toBeLessThan(1);
  }, 120_000);
});
