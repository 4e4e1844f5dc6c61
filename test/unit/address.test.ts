import { describe, it, expect } from 'vitest';
import {
  MAX_ADDRESS_LENGTH,
  mailboxProblem,
  parseGivenMailbox,
  parseMailbox,
} from '../../src/domain/address.js';

describe('parseMailbox: valid', () => {
  it.each([
    ['jane@example.org', { address: 'jane@example.org' }],
    ['  jane@example.org  ', { address: 'jane@example.org' }],
    ['Jane@Example.ORG', { address: 'Jane@example.org' }],
    ['Jane Doe <jane@example.org>', { name: 'Jane Doe', address: 'jane@example.org' }],
    ['  Jane   Doe   <jane@Mail.Example.org> ', { name: 'Jane   Doe', address: 'jane@mail.example.org' }],
    ['Jane Doe<jane@example.org>', { name: 'Jane Doe', address: 'jane@example.org' }],
    ['<jane@example.org>', { address: 'jane@example.org' }],
    ['"" <jane@example.org>', { address: 'jane@example.org' }],
    ['"  " <jane@example.org>', { address: 'jane@example.org' }],
    ['"Doe, Jane" <jane@example.org>', { name: 'Doe, Jane', address: 'jane@example.org' }],
    ['" Doe; Jane <boss> " <jane@example.org>', { name: 'Doe; Jane <boss>', address: 'jane@example.org' }],
    ['"Jane \\"JJ\\" Doe" <jane@example.org>', { name: 'Jane "JJ" Doe', address: 'jane@example.org' }],
    ['"back\\\\slash" <jane@example.org>', { name: 'back\\slash', address: 'jane@example.org' }],
    ['Dr. Jane Doe <jane@example.org>', { name: 'Dr. Jane Doe', address: 'jane@example.org' }],
    ['Jürgen Ñandú 日本 <j@example.org>', { name: 'Jürgen Ñandú 日本', address: 'j@example.org' }],
    // Right-to-left names need no direction overrides; a right-to-left mark is no override.
    ['יעל כהן <yael@example.org>', { name: 'יעל כהן', address: 'yael@example.org' }],
    ['\u200fسارة\u200f <sara@example.org>', { name: '\u200fسارة\u200f', address: 'sara@example.org' }],
    [
      "o'brien+tag.x!#$%&*/=?^_`{|}~-@sub-domain.example.co",
      { address: "o'brien+tag.x!#$%&*/=?^_`{|}~-@sub-domain.example.co" },
    ],
    ['a@b.c1', { address: 'a@b.c1' }],
    ['a@1.example', { address: 'a@1.example' }],
    // Internationalised domains in their ASCII form, so that either spelling is the same address.
    ['jane@exämple.org', { address: 'jane@xn--exmple-cua.org' }],
    ['Jane <JANE@Bücher.Example>', { name: 'Jane', address: 'JANE@xn--bcher-kva.example' }],
    ['x@例え.テスト', { address: 'x@xn--r8jz45g.xn--zckzah' }],
  ])('%j', (input, expected) => {
    expect(parseMailbox(input)).toEqual(expected);
  });

  it('leaves name undefined rather than empty', () => {
    expect(parseMailbox('<jane@example.org>')).not.toHaveProperty('name');
  });

  it('accepts the length limits exactly', () => {
    const local = 'l'.repeat(64);
    const label = 'd'.repeat(63);
    const domain = `${label}.${label}.${label}.${'e'.repeat(57)}`;
    expect(domain.length).toBe(249);
    const longest = `${'l'.repeat(4)}@${domain}`;
    expect(longest.length).toBe(MAX_ADDRESS_LENGTH);
    expect(parseMailbox(longest)).toEqual({ address: longest });
    expect(parseMailbox(`${local}@example.org`)).toEqual({ address: `${local}@example.org` });
    expect(parseMailbox(`${'n'.repeat(200)} <a@example.org>`)).toEqual({
      name: 'n'.repeat(200),
      address: 'a@example.org',
    });
  });
});

describe('parseMailbox: invalid', () => {
  it.each([
    '',
    '   ',
    'jane',
    'jane@',
    '@example.org',
    'jane@example',
    'jane@@example.org',
    'jane@doe@example.org',
    'jane@example.org.',
    'jane@.example.org',
    'jane@exa_mple.org',
    'jane@-example.org',
    'jane@example-.org',
    'jane@example.123',
    'jane@192.168.0.1',
    'jane@[192.168.0.1]',
    '.jane@example.org',
    'jane.@example.org',
    'ja..ne@example.org',
    '"jane doe"@example.org',
    'jane doe@example.org',
    'jane(comment)@example.org',
    'jane@example.org (Jane)',
    'jäne@example.org',
    'jane@-bücher.example',
    'jane@bücher-.example',
    // The same, once mapped: a soft hyphen dropped, full-width stops and hyphens made ASCII.
    'jane@bücher-\u00ad.example',
    'jane@bücher-。example',
    'jane@bücher-．example',
    'jane@－bücher.example',
    'jane@ab--ü.example',
    'jane@bücher',
    'Jane <jane@example.org',
    'Jane jane@example.org>',
    '< jane@example.org>',
    'Jane <jane@example.org> trailing',
    'Jane <<jane@example.org>>',
    'Jane <a@b.example> <c@d.example>',
    'Jane <jane@example.org>>',
    'Ja<ne <jane@example.org>',
    'Ja>ne <jane@example.org>',
    'a@b.example, c@d.example',
    'a@b.example,c@d.example',
    'a@b.example; c@d.example',
    'Doe, Jane <jane@example.org>',
    'Doe; Jane <jane@example.org>',
    'Friends: a@b.example, c@d.example;',
    'Friends: <a@b.example>',
    'Jane (work) <jane@example.org>',
    'jane@example.org <jane@example.org>',
    'Jane "JJ" Doe <jane@example.org>',
    '"Jane" Doe <jane@example.org>',
    '"Jane <jane@example.org>',
    '"Jane\\" <jane@example.org>',
    'back\\slash <jane@example.org>',
    '"a" <b@c.example>, "d" <e@f.example>',
  ])('%j', (input) => {
    expect(parseMailbox(input)).toBeNull();
  });

  it.each([
    'a@b.example\r\nBcc: x@y.example',
    'a@b.example\nBcc: x@y.example',
    'a@b.example\rBcc: x@y.example',
    'Jane\r\nBcc: x@y.example <a@b.example>',
    '"Jane\r\nBcc: x@y.example" <a@b.example>',
    'a@b.example\u0000',
    'Jane\t<a@b.example>',
    'Ja\u007fne <a@b.example>',
    'Jane\u2028 <a@b.example>',
    '"Jane\u2029" <a@b.example>',
    'a@b.example\u0085',
  ])('rejects control characters anywhere: %j', (input) => {
    expect(parseMailbox(input)).toBeNull();
  });

  it('rejects inputs over the length limits', () => {
    const label = 'd'.repeat(63);
    const domain = `${label}.${label}.${label}.${'e'.repeat(57)}`;
    expect(parseMailbox(`${'l'.repeat(5)}@${domain}`)).toBeNull(); // address 255
    expect(parseMailbox(`${'l'.repeat(65)}@example.org`)).toBeNull();
    expect(parseMailbox(`a@${'d'.repeat(64)}.example`)).toBeNull();
    expect(parseMailbox(`a@${`${'d'.repeat(63)}.`.repeat(4)}org`)).toBeNull(); // domain 259, address 261
    expect(parseMailbox(`${'n'.repeat(201)} <a@example.org>`)).toBeNull();
    expect(parseMailbox(`"${'n'.repeat(201)}" <a@example.org>`)).toBeNull();
    expect(parseMailbox(`${' '.repeat(307)}a@example.org`)).not.toBeNull(); // 320 in total
    expect(parseMailbox(`${' '.repeat(308)}a@example.org`)).toBeNull(); // 321 in total
  });
});

describe('mailboxProblem: why an address was refused, where it can be said for certain', () => {
  it.each<[unknown, string | undefined]>([
    [42, 'Give one address as a string, e.g. "jane@example.org"'],
    [['jane@example.org'], 'Give one address as a string, e.g. "jane@example.org"'],
    ['jane@example.org\r\nBcc: x@y.org', 'An address may not contain a line break or a control character'],
    ['x\u0000@example.org', 'An address may not contain a line break or a control character'],
    ['Jane \ud800 <jane@example.org>', 'The address contains a lone surrogate, which is not Unicode text'],
    [
      'Jane\u202egro.elpmaxe <jane@example.org>',
      'An address may not contain a direction override (U+202A–U+202E, U+2066–U+2069), which can show its name as another',
    ],
    [
      '\u2067Jane\u2069 <jane@example.org>',
      'An address may not contain a direction override (U+202A–U+202E, U+2066–U+2069), which can show its name as another',
    ],
    [
      'jane@example.org, joe@example.org',
      'Give one address: a send has one recipient (a batch sends to several)',
    ],
    [
      'Jane <jane@example.org;joe@example.org>',
      'Give one address: a send has one recipient (a batch sends to several)',
    ],
    [
      'jane@example.org joe@example.org',
      'Give one address: a send has one recipient (a batch sends to several)',
    ],
    ['not-an-email', 'An address needs an @, e.g. jane@example.org'],
    ['jöhn@example.org', 'The part before the @ must be ASCII'],
    ['jane@localhost', 'The domain needs a dot: a name such as example.org, not localhost or an IP address'],
    // Refused for reasons a hint would only guess at: no hint.
    ['@example.org', undefined],
    ['jane doe@example.org', undefined],
    ['Doe, Jane <jane@example.org>', undefined],
    ['jane@192.168.0.1', undefined],
  ])('%j → %s', (input, problem) => {
    expect(parseGivenMailbox(input as string)).toBeNull();
    expect(mailboxProblem(input)).toBe(problem);
  });
});
