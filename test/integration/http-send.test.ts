import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/domain/api-key.js';
import { NOT_UTF8_HINT } from '../../src/http/check-body.js';
import {
  bearer,
  countNotifications,
  expectError,
  getStatus,
  send,
  SEND_PATH,
  sendOk,
  storedData,
} from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §4.1 and §7.1, product.md §3: the send request, its validation and its check order. */

const TEMPLATE_ERROR = "Missing or invalid 'template'";
const TO_ERROR = "Missing or invalid 'to' (recipient email)";
const TYPE_ERROR = "Only 'email' type is supported";
const JSON_ERROR = 'Invalid JSON body';

let ctx: TestContext;
/** A project without a contact email: `to` is required. */
let apiKey: string;
let projectId: number;
/** A project with a contact email: `to` may be left out. */
let contactKey: string;
let contactProjectId: number;
const CONTACT = 'ops@client.example';

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey, projectId } = await seedProject(ctx.services));
  ({ apiKey: contactKey, projectId: contactProjectId } = await seedProject(ctx.services, {
    contactEmail: CONTACT,
  }));
});
afterAll(() => ctx.close());

describe('202 Accepted', () => {
  it('has exactly id (integer), request_id (string), status "queued" and message (string)', async () => {
    const response = await send(ctx.app, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      data: { user_name: 'Jane' },
    });
    expect(response.statusCode).toBe(202);
    expect(response.headers['content-type']).toMatch(/^application\/json\b/);
    const body = response.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual(['id', 'message', 'request_id', 'status']);
    expect(Number.isInteger(body.id)).toBe(true);
    expect(body.id as number).toBeGreaterThan(0);
    expect(typeof body.request_id).toBe('string');
    expect((body.request_id as string).length).toBeGreaterThan(0);
    expect(body.status).toBe('queued');
    expect(typeof body.message).toBe('string');
    expect((body.message as string).length).toBeGreaterThan(0);
  });

  it('gives every notification its own id and request_id', async () => {
    const a = await sendOk(ctx.app, apiKey);
    const b = await sendOk(ctx.app, apiKey);
    expect(a.id).not.toBe(b.id);
    expect(a.request_id).not.toBe(b.request_id);
  });

  it('issues request_ids as time-ordered UUIDs (version 7), in the order they are accepted', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await sendOk(ctx.app, apiKey)).request_id);
    // Batches of the same millisecond too: ordered ids keep the request_id index append-only.
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications/batch',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: Array.from({ length: 50 }, () => ({ template: 'user_created', to: 'a@example.org' })),
    });
    expect(batch.statusCode).toBe(202);
    ids.push(
      ...batch.json<{ notifications: { request_id: string }[] }>().notifications.map((n) => n.request_id),
    );
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
  });

  it('accepts type "email" explicitly', async () => {
    const body = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'a@example.org',
      type: 'email',
    });
    const status = await getStatus(ctx.app, apiKey, body.request_id);
    expect(status.json()).toMatchObject({ type: 'email' });
  });

  it('accepts a recipient with a display name', async () => {
    const body = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'Jane Doe <jane@example.org>',
    });
    const status = await getStatus(ctx.app, apiKey, body.request_id);
    expect(status.json<{ to: string }>().to).toContain('jane@example.org');
  });
});

describe("400 Missing or invalid 'template'", () => {
  const bodies: [string, Record<string, unknown>][] = [
    ['missing', { to: 'jane@example.org' }],
    ['empty', { template: '', to: 'jane@example.org' }],
    ['whitespace only', { template: '   ', to: 'jane@example.org' }],
    ['tabs and newlines only', { template: '\t\n', to: 'jane@example.org' }],
    ['a number', { template: 42, to: 'jane@example.org' }],
    ['null', { template: null, to: 'jane@example.org' }],
    ['a boolean', { template: true, to: 'jane@example.org' }],
    ['an array', { template: ['user_created'], to: 'jane@example.org' }],
    ['an object', { template: { name: 'user_created' }, to: 'jane@example.org' }],
  ];
  it.each(bodies)('template %s', async (_label, body) => {
    expectError(await send(ctx.app, apiKey, body), 400, TEMPLATE_ERROR);
  });

  it('when the JSON body is not an object', async () => {
    for (const raw of ['[]', '"user_created"', '42', 'null', 'true']) {
      expectError(await send(ctx.app, apiKey, raw), 400, TEMPLATE_ERROR);
    }
  });

  it('with a hint when the field was sent under another case', async () => {
    const response = await send(ctx.app, apiKey, { Template: 'user_created', to: 'jane@example.org' });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: TEMPLATE_ERROR,
      hint: "Field names are case-sensitive: 'Template' is not 'template'",
    });
    // Only a missing field gets it: a bad value is not a misspelled name.
    const bad = await send(ctx.app, apiKey, { template: '', TEMPLATE: 'x', to: 'jane@example.org' });
    expect(bad.json()).toEqual({ error: TEMPLATE_ERROR });
  });
});

describe("400 Missing or invalid 'to' (recipient email)", () => {
  it('when there is no `to` and the project has no contact email', async () => {
    const response = await send(ctx.app, apiKey, { template: 'user_created' });
    expectError(response, 400, TO_ERROR);
    expect(response.json<{ hint?: string }>().hint).toBe(
      "No 'to' was given, and the project has no contact email to send to instead",
    );
  });

  const invalid: [string, unknown][] = [
    ['not an address', 'not-an-email'],
    ['no domain', 'jane@'],
    ['no local part', '@example.org'],
    ['no dot in the domain', 'jane@localhost'],
    ['whitespace only', '   '],
    ['two addresses with a comma', 'jane@example.org, joe@example.org'],
    ['two addresses with a semicolon', 'jane@example.org;joe@example.org'],
    ['two addresses with a space', 'jane@example.org joe@example.org'],
    ['two bracketed addresses', 'Jane <jane@example.org>, Joe <joe@example.org>'],
    ['CRLF header injection', 'jane@example.org\r\nBcc: victim@example.org'],
    ['LF header injection', 'jane@example.org\nBcc: victim@example.org'],
    ['CRLF in the display name', 'Jane\r\nBcc: victim@example.org <jane@example.org>'],
    ['a number', 42],
    ['an array', ['jane@example.org']],
    ['an object', { email: 'jane@example.org' }],
  ];
  it.each(invalid)('`to` present but invalid: %s', async (_label, to) => {
    const before = await countNotifications(ctx.services, projectId);
    expectError(await send(ctx.app, apiKey, { template: 'user_created', to }), 400, TO_ERROR);
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });

  it('says why where it can: the hint beside the fixed error', async () => {
    const response = await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@localhost' });
    expectError(response, 400, TO_ERROR);
    expect(response.json<{ hint?: string }>().hint).toMatch(/^The domain needs a dot/);
  });

  it('an invalid `to` is refused even when the project has a contact email to fall back on', async () => {
    for (const to of [
      '',
      'not-an-email',
      'jane@example.org, joe@example.org',
      'jane@example.org\r\nBcc: x@y.org',
    ]) {
      expectError(await send(ctx.app, contactKey, { template: 'user_created', to }), 400, TO_ERROR);
    }
  });
});

describe('contact email fallback', () => {
  it('uses the project contact email when `to` is absent', async () => {
    const body = await sendOk(ctx.app, contactKey, { template: 'user_created', data: { user_name: 'Ops' } });
    const status = await getStatus(ctx.app, contactKey, body.request_id);
    expect(status.statusCode).toBe(200);
    expect(status.json<{ to: string }>().to).toBe(CONTACT);
  });

  it('sends to `to`, not to the contact email, when both exist', async () => {
    const body = await sendOk(ctx.app, contactKey, { template: 'user_created', to: 'jane@example.org' });
    const status = await getStatus(ctx.app, contactKey, body.request_id);
    expect(status.json<{ to: string }>().to).toBe('jane@example.org');
  });
});

describe("400 Only 'email' type is supported", () => {
  it.each([['sms'], ['push'], ['EMAIL'], [''], [1]])('type %j', async (type) => {
    expectError(
      await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org', type }),
      400,
      TYPE_ERROR,
    );
  });
});

describe('check order (product.md §3)', () => {
  it('401 comes before any body error', async () => {
    const wrongKey = generateApiKey().key;
    expectError(await send(ctx.app, wrongKey, '{not json'), 401, 'Invalid or missing API key');
    expectError(await send(ctx.app, wrongKey, { template: '' }), 401, 'Invalid or missing API key');
    expectError(
      await send(ctx.app, null, { template: '', type: 'sms', to: 'x' }),
      401,
      'Invalid or missing API key',
    );
    expectError(
      await send(ctx.app, wrongKey, 'template=x', { 'content-type': 'text/plain' }),
      401,
      'Invalid or missing API key',
    );
  });

  it('malformed JSON gives 400 Invalid JSON body', async () => {
    for (const raw of ['{', '{"template": "user_created",}', "{'template': 'x'}", 'not json', '']) {
      expectError(await send(ctx.app, apiKey, raw), 400, JSON_ERROR);
    }
  });

  it('valid JSON with a prototype key gives 400 Invalid JSON body, with a hint that says why', async () => {
    for (const raw of [
      '{"template":"user_created","to":"a@example.com","data":{"__proto__":{"admin":true}}}',
      '{"template":"user_created","to":"a@example.com","data":{"constructor":{"prototype":{"x":1}}}}',
    ]) {
      const response = await send(ctx.app, apiKey, raw);
      expectError(response, 400, JSON_ERROR);
      expect(response.json().hint).toBe(
        "A key named '__proto__', or 'constructor' holding a 'prototype' key, is refused",
      );
    }
    // Malformed JSON has no hint: the parser's own words would say nothing a caller can act on.
    expect(Object.keys((await send(ctx.app, apiKey, '{')).json())).toEqual(['error']);
  });

  it('takes a byte order mark before the JSON, as the management API does', async () => {
    const body = JSON.stringify({
      template: 'user_created',
      to: 'bom@example.com',
      data: { user_name: 'B' },
    });
    for (const url of [SEND_PATH, `${SEND_PATH}/batch`]) {
      const raw = url === SEND_PATH ? `\uFEFF${body}` : `\uFEFF[${body}]`;
      const response = await ctx.app.inject({
        method: 'POST',
        url,
        headers: { ...bearer(apiKey), 'content-type': 'application/json' },
        payload: Buffer.from(raw, 'utf8'),
      });
      expect(response.statusCode, response.body).toBe(202);
    }
    // Only at the start: one inside the JSON is still malformed.
    expectError(await send(ctx.app, apiKey, `{\uFEFF"template":"user_created"}`), 400, JSON_ERROR);
  });

  it('a body whose bytes are not UTF-8 gives 400 Invalid JSON body, with a hint, small or large', async () => {
    for (const filler of ['', 'x'.repeat(20_000)]) {
      const good = `{"template":"user_created","to":"a@example.com","data":{"user_name":"Ren${filler}"}}`;
      // A Latin-1 é (0xE9) where UTF-8 has two bytes: decoded anyway, it would reach Jane as U+FFFD.
      const bytes = Buffer.from(good.replace('Ren', 'Ren\u0000'), 'utf8');
      bytes[bytes.indexOf(0)] = 0xe9;
      for (const url of [SEND_PATH, `${SEND_PATH}/batch`]) {
        const response = await ctx.app.inject({
          method: 'POST',
          url,
          headers: { ...bearer(apiKey), 'content-type': 'application/json' },
          payload: url === SEND_PATH ? bytes : Buffer.concat([Buffer.from('['), bytes, Buffer.from(']')]),
        });
        expectError(response, 400, JSON_ERROR);
        expect(response.json().hint).toBe(NOT_UTF8_HINT);
      }
      const fine = await ctx.app.inject({
        method: 'POST',
        url: SEND_PATH,
        headers: { ...bearer(apiKey), 'content-type': 'application/json' },
        payload: Buffer.from(good.replace('Ren', 'Ren\u00e9'), 'utf8'),
      });
      expect(fine.statusCode, fine.body).toBe(202);
    }
  });

  it('a POST with neither a body nor a Content-Type gives 400 Invalid JSON body', async () => {
    for (const url of [SEND_PATH, `${SEND_PATH}/batch`]) {
      const response = await ctx.app.inject({ method: 'POST', url, headers: bearer(apiKey) });
      expectError(response, 400, JSON_ERROR);
    }
  });

  it('template is checked before type, and type before to', async () => {
    const allWrong = { template: '', type: 'sms', to: 'not-an-email' };
    expectError(await send(ctx.app, apiKey, allWrong), 400, TEMPLATE_ERROR);
    expectError(await send(ctx.app, apiKey, { ...allWrong, template: 'user_created' }), 400, TYPE_ERROR);
    expectError(
      await send(ctx.app, apiKey, { ...allWrong, template: 'user_created', type: 'email' }),
      400,
      TO_ERROR,
    );
    // Type before a missing recipient too (project without a contact email).
    expectError(await send(ctx.app, apiKey, { template: 'user_created', type: 'sms' }), 400, TYPE_ERROR);
  });
});

describe('data and variables', () => {
  it('accepts placeholder values in `data`', async () => {
    const body = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      data: { user_name: 'Jane', role: 'admin' },
    });
    expect(await storedData(ctx.services, body.request_id)).toEqual({ user_name: 'Jane', role: 'admin' });
  });

  it('accepts placeholder values in `variables`', async () => {
    const body = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      variables: { user_name: 'Joe', role: 'viewer' },
    });
    expect(await storedData(ctx.services, body.request_id)).toEqual({ user_name: 'Joe', role: 'viewer' });
  });

  it('merges both, `data` winning on a shared key', async () => {
    const body = await sendOk(ctx.app, apiKey, {
      template: 'user_created',
      to: 'jane@example.org',
      variables: { user_name: 'from variables', role: 'viewer', only_variables: '1' },
      data: { user_name: 'from data', only_data: '2' },
    });
    expect(await storedData(ctx.services, body.request_id)).toEqual({
      user_name: 'from data',
      role: 'viewer',
      only_variables: '1',
      only_data: '2',
    });
  });

  it('keeps non-string values as sent (numbers, booleans, nested objects)', async () => {
    const data = { count: 15, ok: true, user: { name: 'Jane' } };
    const body = await sendOk(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org', data });
    expect(await storedData(ctx.services, body.request_id)).toEqual(data);
  });

  const notObjects: [string, unknown][] = [
    ['a string', 'user_name=Jane'],
    ['a number', 15],
    ['an array', [{ user_name: 'Jane' }]],
    ['a boolean', true],
  ];
  it.each(notObjects)('400 when `data` is %s', async (_label, data) => {
    const before = await countNotifications(ctx.services, projectId);
    expectError(
      await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org', data }),
      400,
      /'data'/,
    );
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });

  it.each(notObjects)('400 when `variables` is %s', async (_label, variables) => {
    expectError(
      await send(ctx.app, apiKey, { template: 'user_created', to: 'jane@example.org', variables }),
      400,
      /'variables'/,
    );
  });
});

it('the contact-email project and the plain project each store only their own notifications', async () => {
  const plain = await countNotifications(ctx.services, projectId);
  const contact = await countNotifications(ctx.services, contactProjectId);
  await sendOk(ctx.app, contactKey, { template: 'user_created' });
  expect(await countNotifications(ctx.services, projectId)).toBe(plain);
  expect(await countNotifications(ctx.services, contactProjectId)).toBe(contact + 1);
});
