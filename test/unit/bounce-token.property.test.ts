import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  bounceKey,
  bounceToken,
  classifyBounceAddress,
  readBounceToken,
  returnPath,
} from '../../src/bounces/token.js';

const RUNS = { numRuns: 300 };
const KEY = bounceKey('test-secret-key');
const OTHER_KEY = bounceKey('another-secret-key');
const DOMAIN = 'bounces.example.com';

const notificationId = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER });
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 100 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ maxLength: 100 }),
  fc.stringMatching(/^[0-9a-zA-Z2-7-]{0,40}$/),
);
/** Characters a token could plausibly be mistyped into, plus a few that lowercase into ASCII or case-fold oddly. */
const tokenChar = fc.oneof(
  fc.constantFrom(...'0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-+@_.'),
  fc.constantFrom('\u212a', '\u017f', '\u0130', '\u0131', ' ', '\u0000'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

function sameLetterIgnoringCase(a: string, b: string): boolean {
  return /^[a-z]$/i.test(a) && /^[a-z]$/i.test(b) && a.toLowerCase() === b.toLowerCase();
}

describe('bounceKey', () => {
  it('derives 32 bytes, stable for a secret and distinct across secrets', () => {
    expect(KEY).toHaveLength(32);
    expect(bounceKey('test-secret-key').equals(KEY)).toBe(true);
    expect(OTHER_KEY.equals(KEY)).toBe(false);
  });
});

describe('bounceToken', () => {
  it('is `<id base 36>-<16 lowercase base32 characters>`', () => {
    fc.assert(
      fc.property(notificationId, (id) => {
        const token = bounceToken(KEY, id);
        expect(token).toMatch(/^[0-9a-z]{1,11}-[a-z2-7]{16}$/);
        expect(token.split('-')[0]).toBe(id.toString(36));
      }),
      RUNS,
    );
  });

  it('matches known answers, so tokens in messages already sent stay valid across releases', () => {
    // Computed independently (Python hmac/hashlib/base64) from the definition in token.ts.
    expect(bounceToken(KEY, 1)).toBe('1-xcs7eqy4udcovhzv');
    expect(bounceToken(KEY, 123456)).toBe('2n9c-2ci2tfogwn6b2pxa');
  });

  it('round-trips any positive safe integer id', () => {
    fc.assert(
      fc.property(notificationId, (id) => {
        expect(readBounceToken(KEY, bounceToken(KEY, id))).toBe(id);
      }),
      RUNS,
    );
    for (const id of [1, 35, 36, Number.MAX_SAFE_INTEGER]) {
      expect(readBounceToken(KEY, bounceToken(KEY, id))).toBe(id);
    }
  });

  it('refuses ids that are not positive safe integers', () => {
    for (const id of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => bounceToken(KEY, id)).toThrow(RangeError);
    }
  });
});

describe('readBounceToken', () => {
  it('never throws, for any string', () => {
    fc.assert(
      fc.property(anyString, (token) => {
        const id = readBounceToken(KEY, token);
        expect(id === null || Number.isSafeInteger(id)).toBe(true);
      }),
      { numRuns: 1000 },
    );
    expect(readBounceToken(KEY, 'a'.repeat(1_000_000))).toBeNull();
  });

  it('reads tokens uppercased or in mixed case by a relay', () => {
    fc.assert(
      fc.property(notificationId, fc.array(fc.boolean(), { maxLength: 28 }), (id, flips) => {
        const token = bounceToken(KEY, id);
        const mixed = [...token].map((c, i) => (flips[i] ? c.toUpperCase() : c)).join('');
        expect(readBounceToken(KEY, token.toUpperCase())).toBe(id);
        expect(readBounceToken(KEY, mixed)).toBe(id);
      }),
      RUNS,
    );
  });

  it('never reads a token changed in one character (other than its letter case) as the same id', () => {
    const edit = fc.oneof(
      fc.record({ op: fc.constant('change' as const), at: fc.nat(), char: tokenChar }),
      fc.record({ op: fc.constant('insert' as const), at: fc.nat(), char: tokenChar }),
      fc.record({ op: fc.constant('delete' as const), at: fc.nat(), char: fc.constant('') }),
    );
    fc.assert(
      fc.property(notificationId, edit, (id, { op, at, char }) => {
        const token = bounceToken(KEY, id);
        const i = at % (token.length + (op === 'insert' ? 1 : 0));
        const original = token[i] ?? '';
        fc.pre(!(op === 'change' && (char === original || sameLetterIgnoringCase(char, original))));
        const edited =
          op === 'change'
            ? token.slice(0, i) + char + token.slice(i + 1)
            : op === 'insert'
              ? token.slice(0, i) + char + token.slice(i)
              : token.slice(0, i) + token.slice(i + 1);
        expect(readBounceToken(KEY, edited)).not.toBe(id);
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses a leading zero, the one other spelling of the same id', () => {
    const token = bounceToken(KEY, 42);
    expect(readBounceToken(KEY, `0${token}`)).toBeNull();
  });

  it('does not fold non-ASCII letters into the token alphabet', () => {
    const token = bounceToken(KEY, 20); // id 20 is 'k' in base 36
    expect(token.startsWith('k-')).toBe(true);
    expect(readBounceToken(KEY, token.replace(/^k/, '\u212a'))).toBeNull();
  });

  it('never accepts a token made with another key', () => {
    fc.assert(
      fc.property(notificationId, (id) => {
        expect(readBounceToken(KEY, bounceToken(OTHER_KEY, id))).toBeNull();
      }),
      RUNS,
    );
  });

  it('refuses the MAC of one id attached to another', () => {
    fc.assert(
      fc.property(notificationId, notificationId, (a, b) => {
        fc.pre(a !== b);
        const mac = bounceToken(KEY, a).split('-')[1];
        expect(readBounceToken(KEY, `${b.toString(36)}-${mac}`)).toBeNull();
      }),
      RUNS,
    );
  });
});

describe('returnPath', () => {
  it('is bounces+<token>@<domain>, which the listener classifies back to the id', () => {
    fc.assert(
      fc.property(notificationId, (id) => {
        const address = returnPath(KEY, id, DOMAIN);
        expect(address).toBe(`bounces+${bounceToken(KEY, id)}@${DOMAIN}`);
        expect(classifyBounceAddress(KEY, address, DOMAIN)).toEqual({ kind: 'token', id });
      }),
      RUNS,
    );
  });
});

describe('classifyBounceAddress', () => {
  const id = 123456;
  const valid = returnPath(KEY, id, DOMAIN);

  it.each([
    ['a token address', valid, { kind: 'token', id }],
    ['in angle brackets with whitespace', `  <${valid}>\t`, { kind: 'token', id }],
    ['uppercased by a relay', valid.toUpperCase(), { kind: 'token', id }],
    ['with the domain in another case', valid.replace(DOMAIN, 'Bounces.EXAMPLE.com'), { kind: 'token', id }],
    ['the plain bounces mailbox', `bounces@${DOMAIN}`, { kind: 'plain' }],
    ['the plain mailbox in brackets, any case', `<BOUNCES@${DOMAIN.toUpperCase()}>`, { kind: 'plain' }],
    ['a garbage token', `bounces+x@${DOMAIN}`, { kind: 'forged' }],
    ['an empty token', `bounces+@${DOMAIN}`, { kind: 'forged' }],
    ['a token from another key', returnPath(OTHER_KEY, id, DOMAIN), { kind: 'forged' }],
    ['an overlong token', `bounces+${'a'.repeat(100)}@${DOMAIN}`, { kind: 'forged' }],
    ['a token address at another domain', returnPath(KEY, id, 'example.org'), { kind: 'foreign' }],
    ['a garbage token at a look-alike domain', `bounces+x@${DOMAIN}.evil`, { kind: 'foreign' }],
    ['a valid token at a look-alike domain', `${valid}.evil`, { kind: 'foreign' }],
    ['a subdomain of the bounce domain', `bounces@sub.${DOMAIN}`, { kind: 'foreign' }],
    ['postmaster', `postmaster@${DOMAIN}`, { kind: 'foreign' }],
    ['another local part that starts alike', `bouncesx@${DOMAIN}`, { kind: 'foreign' }],
    ['a source route around the domain', `@${DOMAIN}:jane@example.org`, { kind: 'foreign' }],
    ['an address relayed through the domain', `jane%example.org@${DOMAIN}`, { kind: 'foreign' }],
    ['the empty string', '', { kind: 'foreign' }],
    ['empty angle brackets (the null path)', '<>', { kind: 'foreign' }],
    ['a bare domain', `@${DOMAIN}`, { kind: 'foreign' }],
    ['no @', 'bounces', { kind: 'foreign' }],
    ['an overlong address', `bounces+${'a'.repeat(300)}@${DOMAIN}`, { kind: 'foreign' }],
  ])('%s', (_name, address, expected) => {
    expect(classifyBounceAddress(KEY, address, DOMAIN)).toEqual(expected);
  });

  it('accepts nothing when no bounce domain is configured', () => {
    expect(classifyBounceAddress(KEY, 'bounces@', '')).toEqual({ kind: 'foreign' });
  });

  it('never throws, and only the bounce domain is ever accepted', () => {
    const address = fc.oneof(
      anyString,
      fc
        .tuple(anyString, fc.constantFrom(DOMAIN, DOMAIN.toUpperCase(), 'example.org', ''))
        .map(([local, domain]) => `${local}@${domain}`),
      fc
        .tuple(notificationId, fc.string({ maxLength: 10 }))
        .map(([n, noise]) => `${returnPath(KEY, n, DOMAIN)}${noise}`),
    );
    fc.assert(
      fc.property(address, (candidate) => {
        const result = classifyBounceAddress(KEY, candidate, DOMAIN);
        if (result.kind !== 'foreign') {
          expect(candidate.trim().replace(/>$/, '').trim().toLowerCase().endsWith(`@${DOMAIN}`)).toBe(true);
        }
      }),
      { numRuns: 1000 },
    );
  });
});
