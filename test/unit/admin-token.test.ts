import type { FastifySchema } from 'fastify';
import { describe, expect, it } from 'vitest';
import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import {
  adminTokenPrefix,
  checkTokenName,
  generateAdminToken,
  hashAdminToken,
  isWellFormedAdminToken,
} from '../../src/domain/admin-token.js';
import { generateApiKey, isWellFormedApiKey } from '../../src/domain/api-key.js';
import { adminValidator, describeErrors, expected, unstorablePath } from '../../src/http/admin-validation.js';

describe('admin tokens', () => {
  it('are hrla_ + 38 base62 characters with a valid checksum, hashed with SHA-256', () => {
    const { key, hash, prefix } = generateAdminToken();
    expect(key).toMatch(/^hrla_[0-9A-Za-z]{38}$/);
    expect(isWellFormedAdminToken(key)).toBe(true);
    expect(hash).toBe(hashAdminToken(key));
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(prefix).toBe(adminTokenPrefix(key));
    expect(prefix).toBe(key.slice(0, 13));
    expect(generateAdminToken().key).not.toBe(key);
  });

  it('refuse a mistyped token, and are never taken for an API key or the other way round', () => {
    const { key } = generateAdminToken();
    for (let i = 5; i < key.length; i += 7) {
      const changed = key.slice(0, i) + (key[i] === 'a' ? 'b' : 'a') + key.slice(i + 1);
      expect(isWellFormedAdminToken(changed), changed).toBe(false);
    }
    const apiKey = generateApiKey().key;
    expect(isWellFormedAdminToken(apiKey)).toBe(false);
    expect(isWellFormedApiKey(key)).toBe(false);
    // The same random part and a checksum made for the other prefix is still refused.
    expect(isWellFormedAdminToken(`hrla_${apiKey.slice(4)}`)).toBe(false);
    expect(isWellFormedAdminToken('')).toBe(false);
    expect(isWellFormedAdminToken(`${key} `)).toBe(false);
  });

  it.each([
    ['ci', 'ci'],
    ['  terraform prod  ', 'terraform prod'],
    ['gitlab:deploy@eu/1', 'gitlab:deploy@eu/1'],
  ])('take the name %j as %j', (name, kept) => expect(checkTokenName(name)).toBe(kept));

  it.each(['', ' ', '-leading', 'x'.repeat(101), 'tab\there', 'semi;colon', 'nul\0'])(
    'refuse the name %j',
    (name) => expect(() => checkTokenName(name)).toThrow(/^Token name must be 1–100/),
  );
});

describe('admin request checks', () => {
  const Body = Type.Object(
    {
      name: Type.String(),
      quota: Type.Optional(Type.Union([Type.Integer(), Type.Literal('unlimited')])),
      html: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      events: Type.Optional(Type.Array(Type.String())),
      locales: Type.Optional(
        Type.Record(Type.String(), Type.Object({ subject: Type.String() }, { additionalProperties: false })),
      ),
    },
    { additionalProperties: false },
  );
  const check = Compile(Body);
  const message = (value: unknown, part: 'body' | 'querystring' = 'body') =>
    describeErrors(Body, [...check.Errors(value)] as never, part);

  it.each([
    [{ name: 'a', extra: 1 }, "Unknown field 'extra'"],
    [{}, "Missing 'name'"],
    [{ name: 1 }, "Invalid 'name' (a string)"],
    [{ name: 'a', quota: 1.5 }, `Invalid 'quota' (a whole number or "unlimited")`],
    [{ name: 'a', html: 3 }, "Invalid 'html' (a string or null)"],
    [{ name: 'a', events: 'x' }, "Invalid 'events' (a list of strings)"],
    [{ name: 'a', locales: { fr: {} } }, "Missing 'locales.fr.subject'"],
    [{ name: 'a', locales: { 'a/b': { subject: 2 } } }, "Invalid 'locales.a/b.subject' (a string)"],
    [{ name: 'a', 'bad\u0000key': 1 }, "Unknown field 'bad?key'"],
    [[], 'Request body must be a JSON object'],
  ])('say what is wrong with %j', (value, said) => {
    expect(check.Check(value)).toBe(false);
    expect(message(value)).toBe(said);
  });

  it('name parameters as parameters', () => {
    expect(message({ name: 'a', x: '1' }, 'querystring')).toBe("Unknown parameter 'x'");
    expect(message({}, 'querystring')).toBe("Missing parameter 'name'");
  });

  it('cut long names short', () => {
    expect(message({ name: 'a', ['k'.repeat(500)]: 1 })).toBe(`Unknown field '${'k'.repeat(100)}…'`);
  });

  it('describe what a schema takes', () => {
    expect(expected({ enum: ['hour', 'day', 'month'] })).toBe('"hour", "day" or "month"');
    expect(expected({ type: 'boolean' })).toBe('true or false');
  });

  it('give the same answers while the compiler loads as once it is loaded', async () => {
    // The first checks of a process wait for TypeBox's compiler; Fastify awaits the promise, and
    // takes its rejection for the refusal.
    const validator = (httpPart: 'body' | 'querystring') =>
      adminValidator({ schema: Body as FastifySchema, httpPart, method: 'POST', url: '/x' });
    const [body, query] = [validator('body'), validator('querystring')];
    const refused = body({ name: 'a', extra: 1 });
    const taken = query({ name: 'a' });
    // A check that cannot run (here: a pattern that is no regular expression) is Herald's fault.
    const broken = adminValidator({
      schema: { type: 'string', pattern: '(' } as FastifySchema,
      httpPart: 'body',
      method: 'POST',
      url: '/x',
    })('x');
    await expect(broken).rejects.toMatchObject({ statusCode: 500 });
    expect(refused).toBeInstanceOf(Promise);
    expect(taken).toBeInstanceOf(Promise);
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_FIELD', message: "Unknown field 'extra'" });
    await expect(taken).resolves.toBe(true);
    expect(body({ name: 'a', extra: 1 })).toMatchObject({ error: { message: "Unknown field 'extra'" } });
    expect(query({})).toMatchObject({ error: { message: "Missing parameter 'name'" } });
    expect(body({ name: 'n\0' })).toMatchObject({
      error: { message: "Invalid 'name' (contains a NUL character)" },
    });
    expect(body({ name: 'n\ud800' })).toMatchObject({
      error: { message: "Invalid 'name' (contains a lone surrogate, which is not Unicode text)" },
    });
    expect(body({ name: 'a' })).toEqual({ value: { name: 'a' } });
  });

  it('find a NUL or a lone surrogate anywhere in a request, in values and in keys', () => {
    const nul = 'contains a NUL character';
    const lone = 'contains a lone surrogate, which is not Unicode text';
    expect(unstorablePath({ a: 'fine', b: ['x', 'y\0'] })).toEqual({ path: 'b.1', problem: nul });
    expect(unstorablePath({ nested: { ['k\0']: 'v' } })).toEqual({ path: 'nested.k\0', problem: nul });
    expect(unstorablePath({ subject: 's\ud800' })).toEqual({ path: 'subject', problem: lone });
    expect(unstorablePath({ ['\udfff']: 'v' })).toEqual({ path: '\udfff', problem: lone });
    // A pair of surrogates is one character (an emoji): fine.
    expect(unstorablePath({ a: 'fine \u{1F600}', n: 1, z: null })).toBeNull();
  });
});
