import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/domain/api-key.js';
import { SEND_PATH, countNotifications, expectError, getStatus, send, sendOk } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §5 and §7.1: the key comes only from `Authorization: Bearer`, and every failure is one 401. */

const INVALID_KEY = 'Invalid or missing API key';
const VALID_BODY = { template: 'user_created', to: 'jane@example.org' };

let ctx: TestContext;
let apiKey: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey, projectId } = await seedProject(ctx.services));
});
afterAll(() => ctx.close());

const apiKeyOf = (key: string) => key;

/** Replaces the character at `index` with another base62 character. */
function mutate(key: string, index: number): string {
  const i = index < 0 ? key.length + index : index;
  const replacement = key[i] === 'A' ? 'B' : 'A';
  return key.slice(0, i) + replacement + key.slice(i + 1);
}

describe('send is refused with 401 and stores nothing', () => {
  const cases: [string, () => Record<string, string>][] = [
    ['no Authorization header', () => ({})],
    ['an empty Authorization header', () => ({ authorization: '' })],
    ['Bearer with no token', () => ({ authorization: 'Bearer ' })],
    [
      'a well-formed key that belongs to no project',
      () => ({ authorization: `Bearer ${generateApiKey().key}` }),
    ],
    ['a malformed key', () => ({ authorization: 'Bearer not-a-key' })],
    ['a truncated key', () => ({ authorization: `Bearer ${apiKey.slice(0, -1)}` })],
    ['the key with a bad checksum', () => ({ authorization: `Bearer ${mutate(apiKey, -1)}` })],
    ['the key with a changed random part', () => ({ authorization: `Bearer ${mutate(apiKey, 10)}` })],
    ['the key with trailing junk', () => ({ authorization: `Bearer ${apiKey}x` })],
    ['the key without a scheme', () => ({ authorization: apiKey })],
    ['the Basic scheme with the key', () => ({ authorization: `Basic ${apiKey}` })],
    [
      'the Basic scheme with the key as user name',
      () => ({ authorization: `Basic ${Buffer.from(`${apiKey}:`).toString('base64')}` }),
    ],
    ['the Token scheme', () => ({ authorization: `Token ${apiKey}` })],
    ['the key only in a cookie', () => ({ cookie: `api_key=${apiKey}; token=${apiKey}` })],
    ['the key only in an X-API-Key header', () => ({ 'x-api-key': apiKey })],
  ];

  it.each(cases)('%s', async (_label, headers) => {
    const before = await countNotifications(ctx.services, projectId);
    const response = await ctx.app.inject({
      method: 'POST',
      url: SEND_PATH,
      headers: { 'content-type': 'application/json', ...headers() },
      payload: JSON.stringify(VALID_BODY),
    });
    expectError(response, 401, INVALID_KEY);
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });

  it('the key only in the query string (?api_key=)', async () => {
    const before = await countNotifications(ctx.services, projectId);
    for (const param of ['api_key', 'apiKey', 'key', 'access_token']) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: `${SEND_PATH}?${param}=${apiKey}`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(VALID_BODY),
      });
      expectError(response, 401, INVALID_KEY);
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });
});

describe('a key sent where Herald does not read it', () => {
  const scheme =
    "Send a project's API key as Authorization: Bearer hrl_…: the Authorization header takes the Bearer scheme";
  it.each([
    ['without a scheme', { authorization: apiKeyOf }, scheme],
    ['with the Basic scheme', { authorization: (key: string) => `Basic ${key}` }, scheme],
    [
      'in an X-API-Key header',
      { 'x-api-key': apiKeyOf },
      "Send a project's API key as Authorization: Bearer hrl_…, not in an X-API-Key header",
    ],
  ])('gets a hint when sent %s', async (_label, given, hint) => {
    const headers = Object.fromEntries(Object.entries(given).map(([name, value]) => [name, value(apiKey)]));
    const response = await send(ctx.app, null, VALID_BODY, headers);
    expectError(response, 401, INVALID_KEY);
    expect(response.json().hint).toBe(hint);
  });

  it('gets a hint when sent in the query string, and none when nothing was sent', async () => {
    const viaQuery = await ctx.app.inject({ method: 'GET', url: `${SEND_PATH}/x?api_key=${apiKey}` });
    expect(viaQuery.json()).toEqual({
      error: INVALID_KEY,
      hint: "Send a project's API key as Authorization: Bearer hrl_…, not in the query string",
    });
    expect((await send(ctx.app, null, VALID_BODY)).json()).toEqual({ error: INVALID_KEY });
  });
});

describe('the bearer scheme', () => {
  it('is accepted in any letter case', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const response = await send(ctx.app, null, VALID_BODY, { authorization: `${scheme} ${apiKey}` });
      expect(response.statusCode, `${scheme}: ${response.body}`).toBe(202);
    }
  });

  it('says how to authenticate on a 401 (RFC 9110 §11.6.1)', async () => {
    const response = await send(ctx.app, null, VALID_BODY);
    expectError(response, 401, INVALID_KEY);
    expect(response.headers['www-authenticate']).toMatch(/^Bearer\b/);
  });
});

describe('status lookups need the key too', () => {
  it('refuses a lookup without a key, with a wrong key or with the key in the query', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey);
    expectError(await getStatus(ctx.app, null, request_id), 401, INVALID_KEY);
    expectError(await getStatus(ctx.app, generateApiKey().key, request_id), 401, INVALID_KEY);
    const viaQuery = await ctx.app.inject({
      method: 'GET',
      url: `${SEND_PATH}/${request_id}?api_key=${apiKey}`,
    });
    expectError(viaQuery, 401, INVALID_KEY);
    const viaCookie = await ctx.app.inject({
      method: 'GET',
      url: `${SEND_PATH}/${request_id}`,
      headers: { cookie: `api_key=${apiKey}` },
    });
    expectError(viaCookie, 401, INVALID_KEY);
    // Auth is checked before the lookup: an unknown id without a key is a 401, not a 404.
    expectError(await getStatus(ctx.app, null, 'no-such-id'), 401, INVALID_KEY);
  });
});

describe('key rotation', () => {
  it('refuses the old key at once and accepts the new one for the same project', async () => {
    const seeded = await seedProject(ctx.services);
    const before = await sendOk(ctx.app, seeded.apiKey);

    const { apiKey: newKey } = await ctx.services.projects.rotateKey(seeded.projectId);
    expect(newKey).not.toBe(seeded.apiKey);

    expectError(await send(ctx.app, seeded.apiKey, VALID_BODY), 401, INVALID_KEY);
    expectError(await getStatus(ctx.app, seeded.apiKey, before.request_id), 401, INVALID_KEY);

    await sendOk(ctx.app, newKey);
    // Notifications belong to the project, not to the key that created them.
    const status = await getStatus(ctx.app, newKey, before.request_id);
    expect(status.statusCode).toBe(200);
    expect(await countNotifications(ctx.services, seeded.projectId)).toBe(2);
  });
});
