import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { bearer, countNotifications, send, storedData } from '../helpers/http.js';
import { backend } from '../helpers/database.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * One tenant's bad input never fails another's request (product.md §8): project A sends poison
 * (data nested thousands of levels deep, NUL characters, huge strings) while project B sends a
 * stream of valid requests, concurrently, so both land in the same group commits. Every valid
 * request is accepted and stored; every poison request gets an answer of its own.
 */

let ctx: TestContext;
let a: { apiKey: string; projectId: number };
let b: { apiKey: string; projectId: number };

beforeAll(async () => {
  ctx = await createTestContext();
  a = await seedProject(ctx.services, { name: 'poisoner' });
  b = await seedProject(ctx.services, { name: 'bystander' });
});
afterAll(() => ctx.close());

function nested(depth: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

/** Poison as raw JSON text, so the nesting is not limited by the test's own serializer. */
const POISON: { name: string; body: string; error?: string; hint?: string }[] = [
  {
    name: 'data nested 5,000 deep',
    body: `{"template":"user_created","to":"x@example.org","data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`,
    error: "Invalid 'data' (nested deeper than 32 levels)",
  },
  {
    name: 'variables nested 40 deep',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', variables: nested(40) }),
    error: "Invalid 'variables' (nested deeper than 32 levels)",
  },
  {
    name: 'a NUL in the template name',
    body: JSON.stringify({ template: 'user_created\u0000', to: 'x@example.org' }),
    error: "Missing or invalid 'template'",
  },
  {
    name: 'a NUL in a data value',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', data: { v: 'a\u0000b' } }),
    error: "Invalid 'data' (contains a NUL character)",
  },
  {
    name: 'a NUL in a data key',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', data: { 'k\u0000': 1 } }),
    error: "Invalid 'data' (contains a NUL character)",
  },
  {
    name: 'a lone surrogate in the template name',
    body: JSON.stringify({ template: 'user_created\ud800', to: 'x@example.org' }),
    error: "Missing or invalid 'template'",
  },
  {
    name: 'a lone surrogate in a data value',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', data: { v: ['ok', 'a\udc00b'] } }),
    error: "Invalid 'data' (contains a lone surrogate, which is not Unicode text)",
  },
  {
    name: 'a lone surrogate in a data key',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', data: { 'k\ud83d': 1 } }),
    error: "Invalid 'data' (contains a lone surrogate, which is not Unicode text)",
  },
  {
    name: 'a lone surrogate in a metadata value',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', metadata: { k: '\ud800' } }),
    error: "Invalid 'metadata' (the value of 'k' contains a lone surrogate, which is not Unicode text)",
  },
  {
    name: 'a number past the range of JSON numbers',
    body: '{"template":"user_created","to":"x@example.org","data":{"n":1e999999}}',
    error: "Invalid 'data' (contains a number past ±1.8e308, which JSON cannot keep)",
  },
  {
    name: 'a NUL in the recipient',
    body: JSON.stringify({ template: 'user_created', to: 'x\u0000@example.org' }),
    error: "Missing or invalid 'to' (recipient email)",
    hint: 'An address may not contain a line break or a control character',
  },
  {
    name: 'a huge string value',
    body: JSON.stringify({ template: 'user_created', to: 'x@example.org', data: { v: 'x'.repeat(250_000) } }),
  },
];

describe(`isolation under poison (${backend})`, () => {
  it.each(POISON.filter((p) => p.error !== undefined))('$name is a 400 of its own', async (poison) => {
    const response = await send(ctx.app, a.apiKey, poison.body);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual(
      poison.hint === undefined ? { error: poison.error } : { error: poison.error, hint: poison.hint },
    );
  });

  it('accepts every valid request of another project sent at the same time as the poison', async () => {
    const before = await countNotifications(ctx.services, b.projectId);
    const valid = Array.from({ length: 150 }, (_, i) =>
      send(ctx.app, b.apiKey, {
        template: 'user_created',
        to: `b${i}@example.org`,
        data: { user_name: `B${i}` },
      }),
    );
    const poison = Array.from({ length: 60 }, (_, i) =>
      send(ctx.app, a.apiKey, POISON[i % POISON.length]!.body),
    );
    const [validAnswers, poisonAnswers] = await Promise.all([Promise.all(valid), Promise.all(poison)]);

    expect(validAnswers.map((r) => r.statusCode)).toEqual(validAnswers.map(() => 202));
    expect(await countNotifications(ctx.services, b.projectId)).toBe(before + 150);
    for (const [i, answer] of poisonAnswers.entries()) {
      const expected = POISON[i % POISON.length]!;
      // The huge string is valid input (within the body limit): it is simply accepted.
      expect(answer.statusCode).toBe(expected.error === undefined ? 202 : 400);
    }
  });
});

function sendBatch(
  app: FastifyInstance,
  apiKey: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/api/v1/notifications/batch',
    headers: { ...bearer(apiKey), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe(`large bodies are parsed off the event loop (${backend})`, () => {
  /** The text of every JSON.parse on this thread while `run` runs. */
  async function mainThreadParses(run: () => Promise<void>): Promise<string[]> {
    const texts: string[] = [];
    const original = JSON.parse;
    JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
      texts.push(String(text));
      return original(text, reviver);
    }) as typeof JSON.parse;
    try {
      await run();
    } finally {
      JSON.parse = original;
    }
    return texts;
  }

  const deepItem = `{"template":"user_created","to":"x@example.org","data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
  const deepBatch = `[${Array.from({ length: 170 }, () => deepItem).join(',')}]`;
  const flatBatch = `[${Array.from({ length: 1_500_000 }, () => '[]').join(',')}]`;

  it('answers a 5 MiB batch nested 5,000 deep, or of a million empty arrays, as before', async () => {
    let validBody = '';
    const texts = await mainThreadParses(async () => {
      const deep = await sendBatch(ctx.app, a.apiKey, deepBatch);
      expect(deep.statusCode).toBe(400);
      expect(deep.json<{ error: string }>().error).toBe(
        "Invalid 'data' (nested deeper than 32 levels) (item 0)",
      );
      const flat = await sendBatch(ctx.app, a.apiKey, flatBatch);
      expect(flat.statusCode).toBe(400);
      expect(flat.json()).toEqual({ error: 'Body must be a JSON array of 1–500 notifications' });
      validBody = JSON.stringify(
        Array.from({ length: 300 }, (_, i) => ({
          template: 'user_created',
          to: `large${i}@example.org`,
          data: { user_name: 'x'.repeat(100), list: [[1, 2], { k: 'v' }] },
        })),
      );
      const valid = await sendBatch(ctx.app, b.apiKey, validBody, { 'idempotency-key': 'large-batch' });
      expect(valid.statusCode).toBe(202);
      const replay = await sendBatch(ctx.app, b.apiKey, validBody, {
        'idempotency-key': 'large-batch',
      });
      expect(replay.headers['idempotent-replayed']).toBe('true');
    });
    // Stored rows and replies were parsed here; none of the request bodies.
    const bodies = new Set([deepBatch, flatBatch, validBody]);
    expect(texts.filter((text) => bodies.has(text)).map((text) => text.length)).toEqual([]);
  });

  it('stores a large body’s data exactly as sent', async () => {
    const data = {
      user_name: 'Ünïcode ✓',
      nested: { list: [1, 'two', null, true], deep: { a: { b: 'c' } } },
    };
    const items = Array.from({ length: 100 }, (_, i) => ({
      template: 'user_created',
      to: `d${i}@example.org`,
      data,
    }));
    const response = await sendBatch(ctx.app, b.apiKey, items);
    expect(response.statusCode).toBe(202);
    const [first] = response.json<{ notifications: { request_id: string }[] }>().notifications;
    expect(await storedData(ctx.services, first!.request_id)).toEqual(data);
  });
});
