import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  SEND_PATH,
  bearer,
  countNotifications,
  expectError,
  expectNotFoundPage,
  send,
  sendOk,
} from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §7.1 (the not-found page) and product.md §3 (405, 413, 415 with a JSON error body). */

let ctx: TestContext;
let apiKey: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey, projectId } = await seedProject(ctx.services));
});
afterAll(() => ctx.close());

const VALID = JSON.stringify({ template: 'user_created', to: 'jane@example.org' });

describe('404 not-found page (not JSON) for paths that are not routes', () => {
  const paths = [
    '/',
    '/api',
    '/api/v1',
    '/api/v1/',
    '/api/v2/notifications',
    '/api/v1/notification',
    '/api/v1/Notifications',
    '/v1/notifications',
    '/notifications',
    '/api/v1/notifications/abc/extra',
  ];

  it.each(paths)('GET %s', async (url) => {
    expectNotFoundPage(await ctx.app.inject({ method: 'GET', url, headers: bearer(apiKey) }));
  });

  it.each(paths)('POST %s with a valid send body', async (url) => {
    const response = await ctx.app.inject({
      method: 'POST',
      url,
      headers: { ...bearer(apiKey), 'content-type': 'application/json' },
      payload: VALID,
    });
    expectNotFoundPage(response);
  });

  it('points a wrong API path at the reference, and any other path at the dashboard and the API', async () => {
    const api = await ctx.app.inject({ url: '/api/v1/nothing', headers: bearer(apiKey) });
    expect(api.body).toContain('There is no such API route');
    expect(api.body).toContain('href="/docs/api"');
    expect(api.body).not.toContain('The API lives under');
    const other = await ctx.app.inject({ url: '/nothing' });
    expect(other.body).toContain('The <a href="/">dashboard</a>');
    expect(other.body).toContain('under <code>/api/v1</code>');
  });

  it('POST to a wrong base URL gets the page whatever the body (malformed, oversized, not JSON)', async () => {
    const before = await countNotifications(ctx.services, projectId);
    const bodies: [string, string][] = [
      ['application/json', '{not json'],
      ['application/json', ''],
      ['application/json', JSON.stringify({ data: 'x'.repeat(300 * 1024) })],
      ['text/plain', 'hello'],
    ];
    for (const [type, payload] of bodies) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/v2/notifications',
        headers: { ...bearer(apiKey), 'content-type': type },
        payload,
      });
      expectNotFoundPage(response);
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });
});

describe('the collection with a trailing slash (product.md §6)', () => {
  it('accepts POST /api/v1/notifications/ as a send', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: `${SEND_PATH}/`,
      headers: { ...bearer(apiKey), 'content-type': 'application/json' },
      payload: VALID,
    });
    expect(response.statusCode).toBe(202);
    expect(response.json<{ status: string }>().status).toBe('queued');
  });

  it('answers another method there with 405 and Allow: POST', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: `${SEND_PATH}/`, headers: bearer(apiKey) });
    expectError(response, 405);
    expect(response.headers.allow).toBe('POST');
  });
});

describe('405 with Allow for a wrong method on an API path', () => {
  it.each(['GET', 'PUT', 'DELETE', 'PATCH'] as const)(
    '%s /api/v1/notifications → Allow: POST',
    async (method) => {
      const response = await ctx.app.inject({ method, url: SEND_PATH, headers: bearer(apiKey) });
      expectError(response, 405);
      expect(response.headers.allow).toBe('POST');
    },
  );

  // product.md §6: DELETE on the item is the cancel route (tested in http-cancel.test.ts).
  it.each(['POST', 'PUT', 'PATCH'] as const)(
    '%s /api/v1/notifications/{id} → Allow lists GET and DELETE',
    async (method) => {
      const { request_id } = await sendOk(ctx.app, apiKey);
      const response = await ctx.app.inject({
        method,
        url: `${SEND_PATH}/${request_id}`,
        headers: { ...bearer(apiKey), 'content-type': 'application/json' },
        payload: VALID,
      });
      expectError(response, 405);
      const allow = String(response.headers.allow)
        .split(',')
        .map((m) => m.trim());
      expect(allow).toEqual(['GET', 'HEAD', 'DELETE']);
    },
  );

  it.each(['GET', 'PUT', 'DELETE', 'PATCH'] as const)(
    '%s /api/v1/notifications/batch → Allow: POST',
    async (method) => {
      const response = await ctx.app.inject({ method, url: `${SEND_PATH}/batch`, headers: bearer(apiKey) });
      expectError(response, 405);
      expect(response.headers.allow).toBe('POST');
    },
  );

  it('a wrong method creates and deletes nothing', async () => {
    const { request_id } = await sendOk(ctx.app, apiKey);
    const before = await countNotifications(ctx.services, projectId);
    await ctx.app.inject({ method: 'PATCH', url: `${SEND_PATH}/${request_id}`, headers: bearer(apiKey) });
    await ctx.app.inject({
      method: 'PUT',
      url: SEND_PATH,
      headers: { ...bearer(apiKey), 'content-type': 'application/json' },
      payload: VALID,
    });
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });
});

describe('413 for a body over 256 KiB', () => {
  it('refuses it with a JSON error and stores nothing', async () => {
    const before = await countNotifications(ctx.services, projectId);
    const body = { template: 'user_created', to: 'jane@example.org', data: { blob: 'x'.repeat(256 * 1024) } };
    expectError(await send(ctx.app, apiKey, body), 413);
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });

  it('accepts a body just under the limit', async () => {
    const body = { template: 'user_created', to: 'jane@example.org', data: { blob: 'x'.repeat(250 * 1024) } };
    expect((await send(ctx.app, apiKey, body)).statusCode).toBe(202);
  });
});

describe('415 when the body is not JSON', () => {
  const types = [
    ['text/plain', VALID],
    ['application/x-www-form-urlencoded', 'template=user_created&to=jane%40example.org'],
    [
      'multipart/form-data; boundary=x',
      '--x\r\nContent-Disposition: form-data; name="template"\r\n\r\nuser_created\r\n--x--',
    ],
    ['application/xml', '<template>user_created</template>'],
  ];
  it.each(types)('%s', async (type, payload) => {
    const before = await countNotifications(ctx.services, projectId);
    expectError(await send(ctx.app, apiKey, payload, { 'content-type': type }), 415);
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
  });

  it.each(['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON'])(
    'accepts %s',
    async (type) => {
      expect((await send(ctx.app, apiKey, VALID, { 'content-type': type })).statusCode).toBe(202);
    },
  );
});

describe('415 when the body is compressed', () => {
  const hint = (coding: string) =>
    `The body came with Content-Encoding: ${coding}; send the JSON as it is, uncompressed, without that header`;

  it('names the coding rather than calling the body malformed JSON, and stores nothing', async () => {
    const before = await countNotifications(ctx.services, projectId);
    for (const [url, body] of [
      [SEND_PATH, VALID],
      [`${SEND_PATH}/batch`, `[${VALID}]`],
    ] as const)
      for (const coding of ['gzip', 'identity, br']) {
        const response = await ctx.app.inject({
          method: 'POST',
          url,
          headers: { ...bearer(apiKey), 'content-type': 'application/json', 'content-encoding': coding },
          payload: gzipSync(body),
        });
        expect(response.statusCode).toBe(415);
        expect(response.json()).toEqual({ error: 'Content-Encoding is not supported', hint: hint(coding) });
        expect(response.headers['accept-encoding']).toBe('identity');
      }
    expect(await countNotifications(ctx.services, projectId)).toBe(before);
    // The key is checked first, as for every other refusal of a body.
    const unknown = await ctx.app.inject({
      method: 'POST',
      url: SEND_PATH,
      headers: { ...bearer('hrl_nope'), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: gzipSync(VALID),
    });
    expect(unknown.statusCode).toBe(401);
  });

  it('does not refuse a call with no body, and names a coding in printable ASCII', async () => {
    // A client's usual headers on a call without a body are not a compressed body.
    const empty = await ctx.app.inject({
      method: 'DELETE',
      url: `${SEND_PATH}/req_nothing`,
      headers: {
        ...bearer(apiKey),
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': '0',
      },
      payload: '',
    });
    expect(empty.statusCode).toBe(404);
    const odd = await ctx.app.inject({
      method: 'POST',
      url: SEND_PATH,
      headers: {
        ...bearer(apiKey),
        'content-type': 'application/json',
        'content-encoding': `x-\u00e9\u00ff${'z'.repeat(60)}`,
      },
      payload: VALID,
    });
    expect(odd.statusCode).toBe(415);
    expect(odd.json()).toEqual({
      error: 'Content-Encoding is not supported',
      hint: hint(`x-??${'z'.repeat(36)}…`),
    });
  });

  it('takes a body said to be sent as it is (identity)', async () => {
    const response = await send(ctx.app, apiKey, VALID, { 'content-encoding': 'Identity' });
    expect(response.statusCode).toBe(202);
  });

  it('is answered by the management API the same way', async () => {
    const { secret } = await ctx.services.adminTokens.create('encoding');
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/admin/projects',
      headers: {
        authorization: `Bearer ${secret}`,
        'content-type': 'application/json',
        'content-encoding': 'gzip',
      },
      payload: gzipSync(JSON.stringify({ name: 'zipped' })),
    });
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual({ error: 'Content-Encoding is not supported', hint: hint('gzip') });
    expect((await ctx.services.projects.list()).map((p) => p.name)).not.toContain('zipped');
    // Calls without a body carry the client's usual headers and are answered as ever.
    const headers = { authorization: `Bearer ${secret}`, 'content-encoding': 'gzip' };
    const list = await ctx.app.inject({ method: 'GET', url: '/api/v1/admin/projects', headers });
    expect(list.statusCode).toBe(200);
    const gone = await ctx.app.inject({
      method: 'DELETE',
      url: '/api/v1/admin/projects/nothing-here',
      headers,
    });
    expect(gone.statusCode).toBe(404);
  });
});

describe("a request's logger", () => {
  it('is made only for a request that logs', async () => {
    const child = vi.spyOn(ctx.services.logger, 'child');
    try {
      await sendOk(ctx.app, apiKey);
      expect((await ctx.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      expect((await ctx.app.inject({ url: '/api/v1/nothing' })).statusCode).toBe(404);
      expect(child).not.toHaveBeenCalled();
    } finally {
      child.mockRestore();
    }
  });
});
