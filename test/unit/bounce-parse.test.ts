import { describe, it, expect } from 'vitest';
import { boundHeaders, MAX_MESSAGE_BYTES, parseMessage, stripTags } from '../../src/bounces/parse.js';
import { parseReport } from '../../src/bounces/report.js';
import { BOUNCE_FIXTURES, FORMAT_FIXTURES, loadBounceFixture } from '../fixtures/bounces/load.js';

describe('parseMessage', () => {
  it('gives plain data that survives a structured clone (so it can come from a worker thread)', async () => {
    for (const name of [...BOUNCE_FIXTURES, ...FORMAT_FIXTURES]) {
      const message = await parseMessage(loadBounceFixture(name));
      expect(structuredClone(message)).toEqual(message);
    }
  });

  it('cuts a header section of thousands of fields, keeping the MIME fields wherever they are', () => {
    const fields = Array.from({ length: 5000 }, (_, i) => `X-Filler-${i}: ${'v'.repeat(20)}`);
    const raw = Buffer.from(
      [...fields, 'MIME-Version: 1.0', 'Content-Type: text/plain', '', 'body'].join('\r\n'),
      'latin1',
    );
    const bounded = boundHeaders(raw).toString('latin1');
    const head = bounded.slice(0, bounded.indexOf('\r\n\r\n'));
    expect(head.split('\r\n').length).toBeLessThanOrEqual(302);
    expect(head).toContain('Content-Type: text/plain');
    expect(bounded.endsWith('\r\n\r\nbody')).toBe(true);
  });

  it('leaves an ordinary header section as it is', () => {
    const raw = loadBounceFixture('postfix-dsn');
    expect(boundHeaders(raw)).toBe(raw);
  });

  it('reads a broken multipart (its boundary matches no part) from its raw body', async () => {
    const text = loadBounceFixture('postfix-dsn')
      .toString('utf8')
      .replace(/boundary="([^"]+)"/, 'boundary="$1-not-used"');
    const report = await parseReport(Buffer.from(text));
    expect(report).toMatchObject({ kind: 'bounce', recipients: [{ recipient: 'jane@example.org' }] });
  });

  it('reads a message of the listener’s maximum size, and ignores what is past it', async () => {
    const filler = 'x'.repeat(76) + '\r\n';
    const big = Buffer.concat([
      loadBounceFixture('qmail-failure'),
      Buffer.from(filler.repeat(Math.ceil((2 * MAX_MESSAGE_BYTES) / filler.length))),
    ]);
    const started = performance.now();
    const report = await parseReport(big);
    console.log(`parseReport of ${big.length} bytes: ${(performance.now() - started).toFixed(0)} ms`);
    expect(report).toMatchObject({ kind: 'bounce', recipients: [{ category: 'user_unknown' }] });
  });
});

describe('stripTags', () => {
  it('keeps the text and line breaks of an HTML report', () => {
    expect(
      stripTags(
        '<style>p{}</style><p>Delivery has failed:</p><div>jane@example.org&nbsp;&lt;x&gt; &#x41;</div>',
      ),
    ).toBe('Delivery has failed:\njane@example.org <x> A\n');
  });

  it('drops scripts and style sheets, one never closed to the end, as a browser does', () => {
    expect(stripTags('<p>a</p><STYLE type="x">p{}</style >b<script>if (a<b) go()</script>c')).toBe('a\nbc');
    expect(stripTags('a<style>p{}<p>not text</p>')).toBe('a');
    // An address in angle brackets is no style sheet.
    expect(stripTags('<p>to <style@example.org>: refused</p>')).toBe('to : refused\n');
    // Thousands of starts that never end are one block, read once.
    expect(stripTags(`a${'<style>'.repeat(40_000)}`)).toBe('a');
  });

  it('reads a tag only up to the next <', () => {
    expect(stripTags('a <b<i>c</i> <br <br>d')).toBe('a <bc <br\nd');
  });
});
