import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countNotifications, send } from '../helpers/http.js';
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
const POISON: { name: string; body: string; error?: string }[] = [
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
    name: 'a NUL in the recipient',
    body: JSON.stringify({ template: 'user_created', to: 'x\u0000@example.org' }),
    error: "Missing or invalid 'to' (recipient email)",
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
    expect(response.json()).toEqual({ error: poison.error });
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
