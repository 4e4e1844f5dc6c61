import fc from 'fast-check';
import { Value } from 'typebox/value';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/domain/canonical-json.js';
import { HeraldError } from '../../src/domain/errors.js';
import { MAX_SCHEDULE_AHEAD_MS, parseDateTime, parseSendRequest } from '../../src/domain/send-request.js';
import { SendBody } from '../../src/http/schemas.js';

/**
 * The send body's schema (what the OpenAPI document promises) and `parseSendRequest` (what the
 * API enforces, in the specification's order and words) must not drift apart: every body the
 * parser accepts fits the schema. The parser may be stricter (mailbox syntax, nesting depth), never
 * looser.
 */

const NOW = Date.UTC(2026, 10, 23, 12);

const anyValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.string({ maxLength: 12 }),
  fc.integer(),
  fc.boolean(),
  fc.dictionary(fc.string({ maxLength: 4 }), fc.string({ maxLength: 4 }), { maxKeys: 2 }),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 2 }),
);

const bodies = fc.record(
  {
    template: fc.oneof(anyValue, fc.constantFrom('welcome', ' ', '', 'a'.repeat(201), 'a\u0000b')),
    type: fc.oneof(anyValue, fc.constantFrom('email', 'sms')),
    to: fc.oneof(
      anyValue,
      fc.constantFrom('jane@example.org', 'Jane <jane@example.org>', 'not an address', ''),
    ),
    data: anyValue,
    variables: anyValue,
    send_at: fc.oneof(
      anyValue,
      fc.constantFrom(
        '2026-11-24T09:00:00Z',
        '2026-11-24T09:00:00+01:00',
        '2026-11-24T09:00:00',
        '2026-02-30T00:00:00Z',
      ),
      fc
        .date({ min: new Date(NOW - 86_400_000), max: new Date(NOW + 40 * 86_400_000), noInvalidDate: true })
        .map((d) => d.toISOString()),
    ),
    reply_to: fc.oneof(anyValue, fc.constantFrom('help@example.org', '"Desk, A" <a@example.org>', 'a, b')),
    metadata: fc.oneof(
      anyValue,
      fc.dictionary(
        fc.stringMatching(/^[a-z_.-]{0,6}$/),
        fc.oneof(fc.string({ maxLength: 5 }), fc.integer()),
        {
          maxKeys: 3,
        },
      ),
    ),
    attachments: fc.oneof(
      anyValue,
      fc.array(
        fc.record(
          {
            filename: fc.constantFrom('a.pdf', 'b.exe', '', '..', 'c'),
            content: fc.constantFrom('', 'aGk=', 'aGk', 'a b='),
            content_type: fc.constantFrom('text/plain', 'application/x-msdownload', 'nope', null),
            extra: fc.constant('x'),
          },
          { requiredKeys: ['filename', 'content'] },
        ),
        { maxLength: 2 },
      ),
    ),
    cc: fc.constant('x@example.org'),
  },
  { requiredKeys: [] },
);

function accepts(body: unknown): boolean {
  try {
    parseSendRequest(body, NOW);
    return true;
  } catch (error) {
    if (!(error instanceof HeraldError)) throw error;
    return false;
  }
}

describe('the send body schema and the parser', () => {
  it('agree: whatever the parser accepts fits the schema', () => {
    fc.assert(
      fc.property(bodies, (body) => {
        if (accepts(body)) expect(Value.Check(SendBody, body), JSON.stringify(body)).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('agree on unknown fields: the parser refuses what the schema does not list', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 8 }), (field) => {
        const body = { template: 'welcome', [field]: null };
        if (!Object.keys(SendBody.properties).includes(field)) {
          expect(accepts(body)).toBe(false);
          expect(Value.Check(SendBody, body)).toBe(false);
        }
      }),
    );
  });

  it('both accept the plain sends of the specification', () => {
    for (const body of [
      { template: 'welcome' },
      { template: 'welcome', to: 'Jane <jane@example.org>', data: { a: 1 }, type: 'email' },
      { template: 'welcome', variables: { a: 'b' }, send_at: '2026-11-24T09:00:00+01:00' },
      {
        template: 'welcome',
        reply_to: 'Desk <help@example.org>',
        metadata: { order_id: 'o-77' },
        attachments: [{ filename: 'a.pdf', content: 'aGk=', content_type: 'application/pdf' }],
      },
    ]) {
      expect(accepts(body)).toBe(true);
      expect(Value.Check(SendBody, body)).toBe(true);
    }
  });
});

describe('parseDateTime', () => {
  it('reads RFC 3339 times with an offset', () => {
    expect(parseDateTime('2026-12-01T09:00:00+01:00')).toBe(Date.UTC(2026, 11, 1, 8));
    expect(parseDateTime('2026-12-01T09:00:00Z')).toBe(Date.UTC(2026, 11, 1, 9));
    expect(parseDateTime('2026-12-01t09:00:00.5-02:30')).toBe(Date.UTC(2026, 11, 1, 11, 30, 0, 500));
    expect(parseDateTime('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
    // What the date-time format allows: a leap second, any number of fraction digits, year 0.
    expect(parseDateTime('2026-12-31T23:59:60Z')).toBe(Date.UTC(2026, 11, 31, 23, 59, 59, 999));
    expect(parseDateTime('2026-12-01T09:00:00.1234567891Z')).toBe(Date.UTC(2026, 11, 1, 9, 0, 0, 123));
    expect(parseDateTime('0000-02-29T00:00:00Z')).not.toBeNull();
    expect(parseDateTime('1900-02-29T00:00:00Z')).toBeNull();
  });

  it('refuses what is not one', () => {
    for (const text of [
      '2026-12-01T09:00:00',
      '2026-12-01',
      '2027-02-29T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-12-01T24:00:00Z',
      '2026-12-01T09:60:00Z',
      '2026-12-01T09:00:00+24:00',
      ' 2026-12-01T09:00:00Z',
      '2026-12-01 09:00:00Z',
    ])
      expect(parseDateTime(text), text).toBeNull();
  });

  it('agrees with Date.parse on every valid time and never throws', () => {
    fc.assert(
      fc.property(
        fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(Date.UTC(9999, 0)) }),
        (d) => {
          expect(parseDateTime(d.toISOString())).toBe(d.getTime());
        },
      ),
    );
    fc.assert(fc.property(fc.string(), (s) => void parseDateTime(s)));
  });

  it('bounds send_at at 30 days ahead', () => {
    const at = (ms: number) => ({ template: 't', send_at: new Date(NOW + ms).toISOString() });
    expect(parseSendRequest(at(MAX_SCHEDULE_AHEAD_MS), NOW).sendAt).toBe(NOW + MAX_SCHEDULE_AHEAD_MS);
    expect(() => parseSendRequest(at(MAX_SCHEDULE_AHEAD_MS + 1), NOW)).toThrow(HeraldError);
    expect(parseSendRequest(at(-86_400_000), NOW).sendAt).toBe(NOW - 86_400_000);
  });
});

describe('canonicalJson', () => {
  const sorted = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sorted)
      : typeof value === 'object' && value !== null
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((k) => [k, sorted((value as Record<string, unknown>)[k])]),
          )
        : value;

  it('writes what JSON.stringify writes for the body with its keys sorted (stored fingerprints stay valid)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(JSON.stringify(sorted(value)));
      }),
      { numRuns: 2000 },
    );
  });

  it('takes a body nested 200,000 levels deep', () => {
    const deep = JSON.parse(`{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}`) as unknown;
    expect(canonicalJson(deep)).toHaveLength(400_006);
  });
});
