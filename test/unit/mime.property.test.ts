import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { simpleParser, type AddressObject } from 'mailparser';
import { composeMessage } from '../../src/mail/mime.js';
import { parseMailbox, type Mailbox } from '../../src/domain/address.js';
import { compileTemplate, normalizeNewlines } from '../../src/domain/render.js';

const RUNS = { numRuns: 200 };

/** A plain message from the examples below; each names its own Message-ID and what it varies. */
const MESSAGE = {
  from: { address: 'no-reply@herald.example' },
  to: { address: 'jane@example.org' },
  subject: 'Hi',
  text: 'x',
  date: new Date(Date.UTC(2025, 0, 2)),
};
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u001f\u007f\u0085\u2028\u2029]/;
const CONTROL_RUNS = new RegExp(`${CONTROLS.source}+`, 'g');

// Full Unicode, lone surrogates included, plus the strings that an attacker would actually send.
const hostileText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 120 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 60 }),
  fc.constantFrom(
    '\r\nBcc: evil@x.example',
    'Hi\r\nBcc: evil@x.example\r\n\r\nbody',
    '\nCc: evil@x.example',
    '\rTo: evil@x.example',
    '=?UTF-8?Q?=0D=0ABcc=3A_evil=40x=2Eexample?=',
    '"Doe, Jane" <evil@x.example>, other@x.example',
    '\u2028Bcc: evil@x.example\u2029',
  ),
  fc
    .tuple(fc.string({ maxLength: 20 }), fc.constantFrom('\r\n', '\n', '\r'), fc.string({ maxLength: 20 }))
    .map(([a, nl, b]) => `${a}${nl}Bcc: ${b}@x.example`),
);

// Candidate `to` strings: arbitrary noise and mailbox-shaped strings, kept only when parseMailbox accepts them.
const recipient: fc.Arbitrary<Mailbox> = fc
  .oneof(
    fc.emailAddress(),
    fc.tuple(hostileText, fc.emailAddress()).map(([name, address]) => `${name} <${address}>`),
    fc
      .tuple(hostileText, fc.emailAddress())
      .map(([name, address]) => `"${name.replace(/["\\]/g, '\\$&')}" <${address}>`),
  )
  .map((candidate) => parseMailbox(candidate))
  .filter((mailbox): mailbox is Mailbox => mailbox !== null);

const BASE_HEADERS = ['from', 'to', 'subject', 'message-id', 'date', 'mime-version', 'content-type'];
const REQUIRED_HEADERS = ['from', 'to', 'message-id', 'date', 'mime-version', 'content-type'];

function singleAddress(field: AddressObject | AddressObject[] | undefined): {
  name: string;
  address?: string;
} {
  expect(field).toBeDefined();
  expect(Array.isArray(field)).toBe(false);
  const value = (field as AddressObject).value;
  expect(value).toHaveLength(1);
  const [only] = value;
  expect(only?.group).toBeUndefined();
  return { name: only?.name ?? '', address: only?.address };
}

/**
 * The name a reader gets back: lone surrogates become U+FFFD in UTF-8. An encoded-word
 * lookalike (`=?UTF-8?Q?…?=`) is sent inside a quoted string, which RFC 2047 says is not
 * decoded, but mailparser (like many mail clients) decodes it anyway; that only changes the
 * displayed name, never the header structure, so the name is not compared then.
 */
function expectedName(name: string): unknown {
  return name.includes('=?') ? expect.any(String) : Buffer.from(name, 'utf8').toString('utf8');
}

function expectCrlfOnly(raw: Buffer): void {
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 0x0a) expect(raw[i - 1], `bare LF at byte ${i}`).toBe(0x0d);
    if (raw[i] === 0x0d) expect(raw[i + 1], `bare CR at byte ${i}`).toBe(0x0a);
  }
}

describe('composeMessage (property)', () => {
  it('never lets subject, names or recipient add a recipient or a header', async () => {
    await fc.assert(
      fc.asyncProperty(
        hostileText,
        hostileText,
        recipient,
        fc.option(hostileText, { nil: null }),
        hostileText,
        fc.boolean(),
        async (subject, fromName, to, html, text, withExtraHeader) => {
          const raw = await composeMessage({
            from: { name: fromName, address: 'no-reply@herald.example' },
            to,
            subject,
            text,
            html,
            messageId: 'req_abc@herald.example',
            date: new Date(Date.UTC(2025, 0, 2, 3, 4, 5)),
            headers: withExtraHeader ? { 'X-Herald-Request': subject } : {},
          });
          expectCrlfOnly(raw);

          const parsed = await simpleParser(raw);
          expect(singleAddress(parsed.to)).toEqual({
            name: expectedName(to.name ?? ''),
            address: to.address,
          });
          expect(singleAddress(parsed.from)).toEqual({
            name: expectedName(fromName.replace(CONTROL_RUNS, ' ').trim()),
            address: 'no-reply@herald.example',
          });
          expect(parsed.cc).toBeUndefined();
          expect(parsed.bcc).toBeUndefined();
          expect(parsed.messageId).toBe('<req_abc@herald.example>');

          const names = parsed.headerLines.map((line) => line.key);
          const expected = new Set([
            ...BASE_HEADERS,
            ...(html ? [] : ['content-transfer-encoding']),
            ...(withExtraHeader ? ['x-herald-request'] : []),
          ]);
          for (const name of names) expect(expected, `unexpected header ${name}`).toContain(name);
          for (const name of REQUIRED_HEADERS) expect(names).toContain(name);
          // Each header at most once: a second To or Subject would be an injection as well.
          expect(new Set(names).size).toBe(names.length);
          expect(parsed.attachments).toHaveLength(0);
          expect(parsed.headers.get('content-type')).toMatchObject({
            value: html ? 'multipart/alternative' : 'text/plain',
          });
        },
      ),
      RUNS,
    );
  });

  it('sends an html message as multipart/alternative with a text part', async () => {
    const raw = await composeMessage({
      ...MESSAGE,
      to: { name: 'Jane', address: 'jane@example.org' },
      text: 'line 1\nline 2\r\nline 3\r',
      html: '<p>line 1</p>\n<p>line 2</p>',
      messageId: 'req_1@herald.example',
      headers: { 'X-Herald-Id': 'a\r\nBcc: evil@x.example' },
    });
    expectCrlfOnly(raw);
    const parsed = await simpleParser(raw);
    expect(parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/alternative' });
    expect(parsed.text).toBe('line 1\nline 2\nline 3\n');
    expect(parsed.html).toBe('<p>line 1</p>\n<p>line 2</p>');
    expect(parsed.headers.get('x-herald-id')).toBe('a Bcc: evil@x.example');
    expect(parsed.bcc).toBeUndefined();
    expect(parsed.date?.toISOString()).toBe('2025-01-02T00:00:00.000Z');
  });

  it('keeps the text part when the text is empty', async () => {
    const raw = await composeMessage({
      ...MESSAGE,
      text: '',
      html: '<p>only html</p>',
      messageId: 'req_4@herald.example',
    });
    const body = raw.toString('latin1');
    expect(body).toContain('Content-Type: multipart/alternative;');
    expect(body).toContain('Content-Type: text/plain; charset=utf-8');
    expect(body).toContain('Content-Type: text/html; charset=utf-8');
  });

  it('sends a text-only message as a single text/plain part', async () => {
    const raw = await composeMessage({
      ...MESSAGE,
      text: 'Only text',
      html: null,
      messageId: 'req_2@herald.example',
    });
    const parsed = await simpleParser(raw);
    expect(parsed.headers.get('content-type')).toMatchObject({ value: 'text/plain' });
    expect(parsed.html).toBe(false);
  });

  it('keeps every line within 998 characters, a long URL or token in a header too', async () => {
    const token = `https://example.org/reset?token=${'Z'.repeat(3000)}`;
    const raw = await composeMessage({
      ...MESSAGE,
      from: { address: 'no-reply@herald.example', name: `Shop ${'N'.repeat(1200)}` },
      to: { address: 'jane@example.org', name: 'J'.repeat(1000) },
      subject: `Welcome ${token}`,
      messageId: 'req_5@herald.example',
      headers: { 'X-Long': 'L'.repeat(999) },
    });
    const lines = raw.toString('latin1').split('\r\n');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(998);
    // Read back as they were given.
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe(`Welcome ${token}`);
    expect(singleAddress(parsed.from).name).toBe(`Shop ${'N'.repeat(1200)}`);
    expect(singleAddress(parsed.to).name).toBe('J'.repeat(1000));
    // Quoting doubles a name's quotes and backslashes: the run is judged as it is written.
    for (const name of ['"'.repeat(899), '\\'.repeat(600), `${'a"'.repeat(449)}a`]) {
      const quoted = await composeMessage({
        ...MESSAGE,
        from: { address: 'no-reply@herald.example', name },
        messageId: 'req_7@herald.example',
      });
      const longest = Math.max(
        ...quoted
          .toString('latin1')
          .split('\r\n')
          .map((line) => line.length),
      );
      expect(longest).toBeLessThanOrEqual(998);
      expect(singleAddress((await simpleParser(quoted)).from).name).toBe(name);
    }
    // A short subject stays as it was written.
    const plain = await composeMessage({
      ...MESSAGE,
      subject: 'Reset at https://example.org/reset?token=abc',
      messageId: 'req_6@herald.example',
    });
    expect(plain.toString('latin1')).toContain('Subject: Reset at https://example.org/reset?token=abc\r\n');
  });

  it('rejects what would put more than one mailbox or a foreign header into the message', async () => {
    const base = { ...MESSAGE, messageId: 'req_3@herald.example' };
    await expect(composeMessage({ ...base, to: { address: 'a@b.example, c@d.example' } })).rejects.toThrow(
      TypeError,
    );
    await expect(
      composeMessage({ ...base, to: { address: 'a@b.example\r\nBcc: c@d.example' } }),
    ).rejects.toThrow(TypeError);
    await expect(composeMessage({ ...base, headers: { Bcc: 'evil@x.example' } })).rejects.toThrow(TypeError);
    await expect(composeMessage({ ...base, headers: { 'X-A\r\nBcc': 'evil@x.example' } })).rejects.toThrow(
      TypeError,
    );
    await expect(composeMessage({ ...base, messageId: 'a@b>\r\nBcc: <c@d' })).rejects.toThrow(TypeError);
    await expect(composeMessage({ ...base, date: new Date(Number.NaN) })).rejects.toThrow(RangeError);
  });
});

const decodeEntities = (html: string): string =>
  html.replace(/&(amp|lt|gt|quot|#39);/g, (_match, entity: string) => {
    const table: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" };
    return table[entity] ?? '';
  });

describe('compileTemplate html escaping (property)', () => {
  const template = compileTemplate('<p>{{v}}</p>', 'html');

  it('never emits a significant character of the value except as an entity', () => {
    const value = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 80 }),
      fc.string({ unit: fc.constantFrom('<', '>', '"', "'", '&', 'a', ';', '#', '\r', '\n'), maxLength: 40 }),
      fc.constantFrom(
        '&amp;',
        '&lt;script&gt;',
        '<script>alert(1)</script>',
        '"><img src=x onerror=alert(1)>',
      ),
    );
    fc.assert(
      fc.property(value, (v) => {
        const out = template.render({ v });
        expect(out.startsWith('<p>') && out.endsWith('</p>')).toBe(true);
        const inner = out.slice(3, -4);
        expect(inner).not.toMatch(/[<>"']/);
        expect(inner.replace(/&(amp|lt|gt|quot|#39);/g, '')).not.toContain('&');
        expect(decodeEntities(out)).toBe(`<p>${normalizeNewlines(v)}</p>`);
      }),
      RUNS,
    );
  });
});

describe('parseMailbox (property)', () => {
  // A valid mailbox with one hostile character inserted anywhere: the inputs most likely to slip through.
  const oneHostileCharacter = fc
    .tuple(
      fc.constantFrom(
        'jane.doe@example.org',
        'Jane Doe <jane.doe@example.org>',
        '"Doe, Jane" <j@example.org>',
      ),
      fc.constantFrom(...' \t,;<>"\\:(@.\r\n\u0000\u2028'),
      fc.nat(),
    )
    .map(([valid, hostile, at]) => {
      const index = at % (valid.length + 1);
      return valid.slice(0, index) + hostile + valid.slice(index);
    });
  const candidate = fc.oneof(
    { arbitrary: oneHostileCharacter, weight: 4 },
    fc.string({ unit: 'binary', maxLength: 80 }),
    fc.string({ unit: fc.constantFrom(...'aB@.- ,;<>"\\\r\n:'), maxLength: 40 }),
    fc.emailAddress(),
    fc
      .tuple(hostileText, fc.emailAddress(), fc.string({ maxLength: 10 }))
      .map(([n, a, tail]) => `${n} <${a}>${tail}`),
  );

  it('returns null or one address without whitespace, separators, brackets or controls', () => {
    fc.assert(
      fc.property(candidate, (input) => {
        const mailbox = parseMailbox(input);
        if (mailbox === null) return;
        expect(mailbox.address).not.toMatch(/[\s,;<>"]/);
        expect(mailbox.address).not.toMatch(CONTROLS);
        expect(mailbox.address.split('@')).toHaveLength(2);
        expect(mailbox.address.length).toBeLessThanOrEqual(254);
        if (mailbox.name !== undefined) expect(mailbox.name).not.toMatch(CONTROLS);
      }),
      RUNS,
    );
  });

  it('rejects an address with a space, separator, bracket, quote or control inserted inside it', () => {
    fc.assert(
      fc.property(
        fc.emailAddress().filter((a) => a.length < 254),
        fc.constantFrom(...' \t,;<>"\\:()[]@\r\n\u0000\u007f\u2028'),
        fc.nat(),
        (address, hostile, at) => {
          const index = 1 + (at % (address.length - 1));
          expect(parseMailbox(address.slice(0, index) + hostile + address.slice(index))).toBeNull();
        },
      ),
      RUNS,
    );
  });

  it('accepts every generated dot-atom address, with or without a quoted name', () => {
    const name = fc.string({ unit: 'grapheme', maxLength: 40 }).filter((n) => !CONTROLS.test(n));
    fc.assert(
      fc.property(
        fc.emailAddress().filter((a) => a.length <= 254),
        name,
        (address, displayName) => {
          const [local, domain] = address.split('@') as [string, string];
          const normalized = `${local}@${domain.toLowerCase()}`;
          expect(parseMailbox(address)).toEqual({ address: normalized });
          const quoted = `"${displayName.replace(/["\\]/g, '\\$&')}" <${address}>`;
          const trimmed = displayName.trim();
          expect(parseMailbox(quoted)).toEqual(
            trimmed ? { name: trimmed, address: normalized } : { address: normalized },
          );
        },
      ),
      RUNS,
    );
  });
});
