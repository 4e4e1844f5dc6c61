import { Validator } from '@seriousme/openapi-schema-validator';
import type { LightMyRequestResponse } from 'fastify';
import { OpenAPIClientAxios, type OpenAPIV3_1 } from 'openapi-client-axios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContractChecker } from '../helpers/contract.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * product.md §6: GET /api/v1/openapi.json, generated from the route schemas, is a valid OpenAPI 3.1
 * document describing every API route; /docs/api renders it from installed files; a client
 * generated from it works against a listening server. (Every response of the HTTP suite is also
 * checked against it: see test/helpers/contract.ts.)
 */

let ctx: TestContext;
let document: OpenAPIV3_1.Document;

beforeAll(async () => {
  ctx = await createTestContext();
  const response = await ctx.app.inject({ url: '/api/v1/openapi.json' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  document = response.json<OpenAPIV3_1.Document>();
});
afterAll(() => ctx.close());

describe('the document', () => {
  it('is valid OpenAPI 3.1', async () => {
    const result = await new Validator().validate(structuredClone(document) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
  });

  it('describes exactly the send API routes, each with its operation id', () => {
    // The management API under /api/v1/admin is checked in admin-openapi.test.ts.
    const send = Object.entries(document.paths ?? {}).filter(([path]) => !path.startsWith('/api/v1/admin/'));
    const operations = send.flatMap(([path, methods]) =>
      Object.entries(methods ?? {}).map(
        ([method, op]) => `${method.toUpperCase()} ${path} ${(op as { operationId: string }).operationId}`,
      ),
    );
    expect(operations.sort()).toEqual([
      'DELETE /api/v1/notifications/{request_id} cancelNotification',
      'GET /api/v1/notifications/{request_id} getNotification',
      'POST /api/v1/notifications sendNotification',
      'POST /api/v1/notifications/batch sendNotificationBatch',
    ]);
  });

  it('names the key, the Idempotency-Key header, the quota headers and the error bodies', () => {
    for (const path of ['/api/v1/notifications', '/api/v1/notifications/batch']) {
      const op = document.paths![path]!.post!;
      expect(op.security).toEqual([{ apiKey: [] }]);
      expect(op.parameters).toContainEqual(
        expect.objectContaining({ in: 'header', name: 'idempotency-key' }),
      );
      const accepted = op.responses['202'] as OpenAPIV3_1.ResponseObject;
      expect(Object.keys(accepted.headers ?? {})).toEqual(
        expect.arrayContaining([
          'X-Quota-Limit',
          'X-Quota-Remaining',
          'X-Quota-Reset',
          'Idempotent-Replayed',
        ]),
      );
      const refused = op.responses['402'] as OpenAPIV3_1.ResponseObject;
      expect(Object.keys(refused.headers ?? {})).toEqual(
        expect.arrayContaining(['Retry-After', 'X-Quota-Limit']),
      );
      expect(op.responses).toHaveProperty('401');
      expect(op.responses).toHaveProperty('4XX');
      expect(op.responses).toHaveProperty('5XX');
    }
    expect(document.components?.securitySchemes?.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('is served without a key', async () => {
    const response = await ctx.app.inject({
      url: '/api/v1/openapi.json',
      headers: { authorization: 'Bearer x' },
    });
    expect(response.statusCode).toBe(200);
  });
});

describe('the contract check', () => {
  const response = (statusCode: number, body: unknown, headers: Record<string, string> = {}) =>
    ({
      statusCode,
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    }) as unknown as LightMyRequestResponse;

  it('finds a response that departs from the document', () => {
    const checker = new ContractChecker(document);
    const url = '/api/v1/notifications/abc';
    const good = {
      id: 1,
      request_id: 'abc',
      status: 'queued',
      template: 't',
      to: 'a@example.org',
      type: 'email',
      attempts: 0,
      created_at: '2026-11-23T10:00:00.000Z',
      updated_at: '2026-11-23T10:00:00.000Z',
    };
    expect(checker.check('GET', url, response(200, good))).toBeNull();
    expect(checker.check('GET', url, response(200, { ...good, status: 'sending' }))).toMatch(/status/);
    expect(checker.check('GET', url, response(200, { ...good, secret: 'x' }))).toMatch(/additional/);
    expect(checker.check('GET', url, response(404, { message: 'gone' }))).toMatch(/error/);
    expect(checker.check('GET', url, response(302, good))).toMatch(/not in the document/);
    expect(
      checker.check('POST', '/api/v1/notifications', response(202, {}, { 'x-quota-remaining': 'many' })),
    ).toMatch(/X-Quota-Remaining/);
    // What the document does not describe is not checked: a wrong method, another path.
    expect(checker.check('PUT', url, response(405, { error: 'x' }))).toBeNull();
    expect(checker.checked).toBe(6);
  });
});

describe('the reference page', () => {
  it('is served at /docs/api from installed files, with no outside address to load', async () => {
    const page = await ctx.app.inject({ url: '/docs/api/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(2);
    for (const asset of assets) {
      expect(asset).not.toMatch(/^(https?:)?\/\//);
      const file = await ctx.app.inject({ url: new URL(asset, 'http://h/docs/api/').pathname });
      expect(file.statusCode, asset).toBe(200);
    }
    // A client error on its files is the client's: never a 500.
    for (const [url, headers] of [
      ['/docs/api/static/%2e%2e/x', {}],
      ['/docs/api/static/index.css', { range: 'bytes=99999999-' }],
      ['/docs/api/static/index.css', { 'if-match': '"x"' }],
    ] as const) {
      const probe = await ctx.app.inject({ url, headers });
      expect(probe.statusCode, url).toBeGreaterThanOrEqual(400);
      expect(probe.statusCode, url).toBeLessThan(500);
    }
    const initializer = await ctx.app.inject({ url: '/docs/api/static/swagger-initializer.js' });
    expect(initializer.body).toContain('/api/v1/openapi.json');
  });
});

describe('a client generated from the document', () => {
  it('sends, sends a batch, polls and cancels', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const address = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const api = new OpenAPIClientAxios({
      definition: document as never,
      axiosConfigDefaults: { baseURL: address, headers: { authorization: `Bearer ${apiKey}` } },
    });
    // The operations are generated at run time from the document, by operationId.
    const client = (await api.init()) as unknown as Record<
      'sendNotification' | 'sendNotificationBatch' | 'getNotification' | 'cancelNotification',
      (params?: unknown, data?: unknown) => Promise<{ status: number; data: unknown }>
    >;

    const sent = await client.sendNotification(null, { template: 'user_created', to: 'jane@example.org' });
    expect(sent.status).toBe(202);
    const requestId = (sent.data as { request_id: string }).request_id;

    const polled = await client.getNotification({ request_id: requestId });
    expect(polled.data).toMatchObject({ request_id: requestId, to: 'jane@example.org' });

    const later = new Date(Date.now() + 3_600_000).toISOString();
    const batch = await client.sendNotificationBatch(null, [
      { template: 'user_created', to: 'a@example.org', send_at: later },
      { template: 'user_created', to: 'b@example.org', send_at: later },
    ]);
    const items = (batch.data as { notifications: { request_id: string }[] }).notifications;
    expect(items).toHaveLength(2);

    const canceled = await client.cancelNotification({ request_id: items[0]!.request_id });
    expect(canceled.data).toMatchObject({ status: 'failed', error_message: 'Canceled' });

    const refused = await client
      .cancelNotification({ request_id: items[0]!.request_id })
      .catch((error: { response: { status: number; data: unknown } }) => error.response);
    expect(refused.status).toBe(409);
    expect(refused.data).toEqual({ error: 'Notification can no longer be canceled' });
  });
});
