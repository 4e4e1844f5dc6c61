import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/domain/api-key.js';
import { countNotifications, expectError, send, windowEndSeconds } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** Spec §7.1 and §8, product.md §3: 402 Request quota exceeded, the X-Quota-* headers, the race. */

const QUOTA_ERROR = 'Request quota exceeded';
const BODY = { template: 'user_created', to: 'jane@example.org' };

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

function quotaHeaders(response: LightMyRequestResponse) {
  return {
    limit: response.headers['x-quota-limit'],
    remaining: response.headers['x-quota-remaining'],
    reset: response.headers['x-quota-reset'],
  };
}

/** Sends once and checks that X-Quota-Reset is the end of the `period` window around the request. */
async function sendAndCheckReset(apiKey: string, period: 'hour' | 'day' | 'month') {
  const before = Date.now();
  const response = await send(ctx.app, apiKey, BODY);
  const after = Date.now();
  // The window may roll over between `before` and `after`; either end is then right.
  const expected = [windowEndSeconds(period, before), windowEndSeconds(period, after)].map(String);
  expect(expected).toContain(response.headers['x-quota-reset']);
  return response;
}

describe('X-Quota headers', () => {
  it('count down on each 202 and stay on the 402 (month window by default)', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 3 });
    for (const remaining of ['2', '1', '0']) {
      const response = await sendAndCheckReset(apiKey, 'month');
      expect(response.statusCode, response.body).toBe(202);
      expect(quotaHeaders(response)).toMatchObject({ limit: '3', remaining });
    }
    const refused = await sendAndCheckReset(apiKey, 'month');
    expectError(refused, 402, QUOTA_ERROR);
    expect(quotaHeaders(refused)).toMatchObject({ limit: '3', remaining: '0' });
    const retryAfter = Number(refused.headers['retry-after']);
    const untilReset = Number(refused.headers['x-quota-reset']) - Math.floor(Date.now() / 1000);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(Math.max(1, untilReset) + 1);
    expect(await countNotifications(ctx.services, projectId)).toBe(3);
  });

  it('reset at the end of a day or hour window, in epoch seconds', async () => {
    for (const period of ['day', 'hour'] as const) {
      const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 1 });
      await ctx.services.projects.update(projectId, { quotaPeriod: period });
      const accepted = await sendAndCheckReset(apiKey, period);
      expect(accepted.statusCode).toBe(202);
      const refused = await sendAndCheckReset(apiKey, period);
      expectError(refused, 402, QUOTA_ERROR);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(period === 'hour' ? 3600 : 86_400);
    }
  });

  it('a quota of 0 refuses every send', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 0 });
    const refused = await send(ctx.app, apiKey, BODY);
    expectError(refused, 402, QUOTA_ERROR);
    expect(quotaHeaders(refused)).toMatchObject({ limit: '0', remaining: '0' });
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('raising the limit lets the project send again at once', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 1 });
    expect((await send(ctx.app, apiKey, BODY)).statusCode).toBe(202);
    expectError(await send(ctx.app, apiKey, BODY), 402, QUOTA_ERROR);
    await ctx.services.projects.update(projectId, { quotaLimit: 2 });
    const again = await send(ctx.app, apiKey, BODY);
    expect(again.statusCode).toBe(202);
    expect(quotaHeaders(again)).toMatchObject({ limit: '2', remaining: '0' });
  });
});

describe('402 comes only after validation', () => {
  it('invalid requests use no quota: after them a quota of N still allows N sends', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 3 });
    const invalid: [unknown, Record<string, string>?][] = [
      [{ to: 'jane@example.org' }],
      [{ template: 'user_created', type: 'sms', to: 'jane@example.org' }],
      [{ template: 'user_created', to: 'not-an-email' }],
      [{ template: 'user_created' }],
      [{ template: 'user_created', to: 'jane@example.org', data: 'x' }],
      ['{not json'],
      [BODY, { 'content-type': 'text/plain' }],
      [BODY, { 'idempotency-key': 'k'.repeat(300) }],
      [BODY, { authorization: `Bearer ${generateApiKey().key}` }],
    ];
    for (const [body, headers] of invalid) {
      const response = await send(ctx.app, apiKey, body, headers);
      expect([400, 401, 415], response.body).toContain(response.statusCode);
    }
    for (const remaining of ['2', '1', '0']) {
      const response = await send(ctx.app, apiKey, BODY);
      expect(response.statusCode, response.body).toBe(202);
      expect(response.headers['x-quota-remaining']).toBe(remaining);
    }
    expectError(await send(ctx.app, apiKey, BODY), 402, QUOTA_ERROR);
    expect(await countNotifications(ctx.services, projectId)).toBe(3);
  });

  it('a project whose quota is used up still gets the 400 for an invalid body, not 402', async () => {
    const { apiKey } = await seedProject(ctx.services, { quotaLimit: 0 });
    expectError(await send(ctx.app, apiKey, { template: '' }), 400, "Missing or invalid 'template'");
    expectError(
      await send(ctx.app, apiKey, { template: 'user_created' }),
      400,
      "Missing or invalid 'to' (recipient email)",
    );
    expectError(await send(ctx.app, apiKey, '{'), 400, 'Invalid JSON body');
  });
});

describe('quota is per project', () => {
  it("one project's exhausted quota does not affect another", async () => {
    const a = await seedProject(ctx.services, { quotaLimit: 1 });
    const b = await seedProject(ctx.services, { quotaLimit: 1 });
    expect((await send(ctx.app, a.apiKey, BODY)).statusCode).toBe(202);
    expectError(await send(ctx.app, a.apiKey, BODY), 402, QUOTA_ERROR);
    const other = await send(ctx.app, b.apiKey, BODY);
    expect(other.statusCode).toBe(202);
    expect(other.headers['x-quota-remaining']).toBe('0');
  });
});

describe('the race', () => {
  it('60 concurrent sends against a quota of 20 give exactly 20 × 202 and 40 × 402', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 20 });
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        send(ctx.app, apiKey, { template: 'user_created', to: `user${i}@example.org` }),
      ),
    );
    const accepted = responses.filter((r) => r.statusCode === 202);
    const refused = responses.filter((r) => r.statusCode === 402);
    expect(accepted).toHaveLength(20);
    expect(refused).toHaveLength(40);
    for (const response of refused) {
      expectError(response, 402, QUOTA_ERROR);
      expect(response.headers['x-quota-remaining']).toBe('0');
    }
    // Each accepted request got its own unit: the remaining counts are 19 … 0, each once.
    const remaining = accepted.map((r) => Number(r.headers['x-quota-remaining'])).sort((x, y) => x - y);
    expect(remaining).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(new Set(accepted.map((r) => r.json<{ request_id: string }>().request_id)).size).toBe(20);
    expect(await countNotifications(ctx.services, projectId)).toBe(20);
  });
});
