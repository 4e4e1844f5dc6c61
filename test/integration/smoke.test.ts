import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

describe('send and status', () => {
  it('accepts a send and reports it queued', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const send = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: { template: 'user_created', to: 'jane@example.org', data: { user_name: 'Jane' } },
    });
    expect(send.statusCode).toBe(202);
    const body = send.json<{ request_id: string; status: string }>();
    expect(body.status).toBe('queued');
    const status = await ctx.app.inject({
      url: `/api/v1/notifications/${body.request_id}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({
      status: 'queued',
      template: 'user_created',
      to: 'jane@example.org',
    });
  });
});

describe('which Herald answers', () => {
  it('gives its version in /healthz', async () => {
    const health = await ctx.app.inject({ url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toEqual({ status: 'ok', version: PACKAGE_VERSION });
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });
});
