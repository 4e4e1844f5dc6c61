import { createHash } from 'node:crypto';
import { PROTOTYPE_KEY_HINT } from '../../src/domain/errors.js';
import { NOT_UTF8_HINT } from '../../src/http/check-body.js';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { ADMIN, adminClient, clientWith, ok, type AdminClient } from '../helpers/admin.js';
import { expectError, expectNotFoundPage, getStatus, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * product.md §13: admin tokens are shown once, stored as hashes and revocable; a project's key is
 * refused on the management API and an admin token on the send API; every call made with a token
 * is in the audit log; calls are limited per token; bodies are bounded and checked.
 */

let ctx: TestContext;
let admin: AdminClient;

beforeAll(async () => {
  ctx = await createTestContext();
  admin = await adminClient(ctx.app, ctx.services, 'ci');
});
afterAll(() => ctx.close());

async function auditEntries() {
  await ctx.services.auditLog.flush();
  return ctx.services.auditLog.list({ limit: 1000 });
}

describe(`admin tokens (${backend})`, () => {
  it('refuse a call without a token, with a project key, a mistyped, a revoked or an unknown token', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const { token, secret } = await ctx.services.adminTokens.create('short-lived');
    const last = secret.at(-1) === 'a' ? 'b' : 'a';
    expect(ok(await clientWith(ctx.app, secret).get('/projects'))).toHaveProperty('projects');
    await ctx.services.adminTokens.revoke(token.id);
    const unknown = (await ctx.services.adminTokens.create('unknown')).secret;
    await ctx.services.storage.db.deleteFrom('admin_tokens').where('name', '=', 'unknown').execute();
    const refusals = [
      ctx.app.inject({ url: `${ADMIN}/projects` }),
      clientWith(ctx.app, apiKey).get('/projects'),
      clientWith(ctx.app, secret.slice(0, -1) + last).get('/projects'),
      clientWith(ctx.app, secret).get('/projects'),
      clientWith(ctx.app, unknown).get('/projects'),
      clientWith(ctx.app, `${admin.token} extra`).get('/projects'),
      ctx.app.inject({ url: `${ADMIN}/projects`, headers: { authorization: `Basic ${admin.token}` } }),
      ctx.app.inject({ url: `${ADMIN}/projects?token=${admin.token}` }),
      ctx.app.inject({ url: `${ADMIN}/projects`, cookies: { token: admin.token } }),
    ];
    for (const response of await Promise.all(refusals)) {
      expectError(response, 401, 'Invalid or missing admin token');
      expect(response.headers['www-authenticate']).toBe('Bearer realm="herald-admin"');
    }
    // The mix-ups a hint can name: a project's key where an admin token belongs, a token sent
    // with another scheme or in the query string. A wrong token is not told from a missing one.
    const [withoutToken, withApiKey, ...others] = (await Promise.all(refusals)).map(
      (response) => response.json<{ hint?: string }>().hint,
    );
    expect(withApiKey).toMatch(/^This is a project's API key \(hrl_…\); .*herald token create/);
    expect([withoutToken, ...others]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      'Send an admin token as Authorization: Bearer hrla_…: the Authorization header takes the Bearer scheme',
      'Send an admin token as Authorization: Bearer hrla_…, not in the query string',
      undefined,
    ]);
  });

  it('are refused on the send API with its own 401, and API keys work there as before', async () => {
    const { apiKey } = await seedProject(ctx.services);
    const refused = await send(ctx.app, admin.token, { template: 'user_created', to: 'a@example.org' });
    expectError(refused, 401, 'Invalid or missing API key');
    expect(refused.json<{ hint?: string }>().hint).toMatch(/^This is an admin token \(hrla_…\)/);
    const unknownKey = await send(ctx.app, 'hrl_nothing', { template: 'user_created', to: 'a@example.org' });
    expect(unknownKey.json<{ hint?: string }>().hint).toBeUndefined();
    expectError(await getStatus(ctx.app, admin.token, 'x'), 401, 'Invalid or missing API key');
    expect((await send(ctx.app, apiKey, { template: 'user_created', to: 'a@example.org' })).statusCode).toBe(
      202,
    );
  });

  it('are stored as a SHA-256 only, listed by prefix, and shown once', async () => {
    const { token, secret } = await ctx.services.adminTokens.create('stored');
    expect(secret).toMatch(/^hrla_[0-9A-Za-z]{38}$/);
    const rows = await ctx.services.storage.db.selectFrom('admin_tokens').selectAll().execute();
    const row = rows.find((r) => r.id === token.id)!;
    expect(row.token_hash).toBe(createHash('sha256').update(secret).digest('hex'));
    expect(row.token_prefix).toBe(secret.slice(0, 13));
    expect(JSON.stringify(rows)).not.toContain(secret.slice(13));
    expect(JSON.stringify(await ctx.services.adminTokens.list())).not.toContain(secret.slice(13));
  });

  it('have names unique among live tokens; revoking one frees its name', async () => {
    const first = await ctx.services.adminTokens.create('deploy');
    await expect(ctx.services.adminTokens.create('deploy')).rejects.toThrow(
      'An admin token named "deploy" already exists',
    );
    await expect(ctx.services.adminTokens.create('  ')).rejects.toThrow(/Token name must be/);
    expect((await ctx.services.adminTokens.revoke(first.token.id)).outcome).toBe('revoked');
    const again = await ctx.services.adminTokens.revoke(first.token.id);
    expect(again.outcome).toBe('unchanged');
    expect(again.token.revokedAt).not.toBeNull();
    const second = await ctx.services.adminTokens.create('deploy');
    expect(second.token.id).not.toBe(first.token.id);
  });

  it('are checked before the body is read: no token and a huge body is a 401, not a 413', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: `${ADMIN}/projects`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(1024 * 1024) }),
    });
    expectError(response, 401, 'Invalid or missing admin token');
  });
});

describe(`the audit log (${backend})`, () => {
  it('records every call made with a token: which token, what, the outcome and when', async () => {
    const auditor = await adminClient(ctx.app, ctx.services, 'auditor');
    const before = Date.now();
    ok(await auditor.post('/projects', { name: 'audited' }), 201);
    expectError(await auditor.post('/projects', { name: 'audited' }), 409);
    ok(await auditor.get('/projects/audited/notifications?recipient=secret%40example.org'));
    expectError(await auditor.get('/projects/nope'), 404, 'Project not found: nope');
    // Calls without a valid token are the API log's, not the audit log's.
    await ctx.app.inject({ url: `${ADMIN}/projects` });
    const project = await ctx.services.projects.get('audited');
    const mine = (await auditEntries()).filter((e) => e.token_name === 'auditor').reverse();
    expect(mine.map((e) => [e.method, e.path, e.status_code, e.error, e.project_id])).toEqual([
      ['POST', `${ADMIN}/projects`, 201, null, project.id],
      ['POST', `${ADMIN}/projects`, 409, 'A project named "audited" already exists', null],
      ['GET', `${ADMIN}/projects/audited/notifications`, 200, null, project.id],
      ['GET', `${ADMIN}/projects/nope`, 404, 'Project not found: nope', null],
    ]);
    const token = (await ctx.services.adminTokens.list()).find((t) => t.name === 'auditor')!;
    for (const entry of mine) {
      expect(entry.token_id).toBe(token.id);
      expect(entry.created_at).toBeGreaterThanOrEqual(before);
    }
    // The query (here an address) is not kept, as in the API log.
    expect(JSON.stringify(mine)).not.toContain('secret');
    expect(token.lastUsedAt).toBeGreaterThanOrEqual(before);
  });
});

describe(`requests (${backend})`, () => {
  it('are JSON objects within the limit, with only the fields the route names, of their types', async () => {
    const cases: [Promise<LightMyRequestResponse>, number, string][] = [
      [admin.post('/projects', '{"name": '), 400, 'Invalid JSON body'],
      [admin.post('/projects', '[]'), 400, 'Request body must be a JSON object'],
      [admin.post('/projects', '"shop"'), 400, 'Request body must be a JSON object'],
      [admin.post('/projects', {}), 400, "Missing 'name'"],
      [admin.post('/projects', { name: 'a', cc: 'x' }), 400, "Unknown field 'cc'"],
      [admin.post('/projects', { name: 7 }), 400, "Invalid 'name' (a string)"],
      [
        admin.post('/projects', { name: 'a', quota: -1.5 }),
        400,
        `Invalid 'quota' (a whole number or "unlimited")`,
      ],
      [
        admin.post('/projects', { name: 'a', contact_email: ['x'] }),
        400,
        "Invalid 'contact_email' (a string or null)",
      ],
      [admin.post('/projects', { name: 'a\u0000b' }), 400, "Invalid 'name' (contains a NUL character)"],
      [admin.post('/projects', { name: 'x'.repeat(17 * 1024) }), 413, 'Request body is larger than 16 KiB'],
      [
        admin.put('/projects/none/templates/t', {
          subject: 's',
          text: 't',
          locales: { fr: { subject: 1, text: 't' } },
        }),
        400,
        "Invalid 'locales.fr.subject' (a string)",
      ],
      [admin.get('/projects/x/notifications?colour=red'), 400, "Unknown parameter 'colour'"],
      // Routes that take no parameters refuse them too, rather than seem to page or sort.
      [admin.get('/projects?sort=name'), 400, "Unknown parameter 'sort'"],
      [admin.get('/projects/x/templates?limit=10'), 400, "Unknown parameter 'limit'"],
      [admin.post('/projects?dry_run=1', { name: 'a' }), 400, "Unknown parameter 'dry_run'"],
      [admin.get('/projects/x/suppressions?limit=1&limit=2'), 400, "Invalid 'limit' (a string)"],
    ];
    for (const [response, status, error] of cases) expectError(await response, status, error);
    const raw = JSON.stringify({ name: 'y' }).replace('{', '{"__proto__":{"name":"x"},');
    const poisoned = await admin.post('/projects', raw);
    expectError(poisoned, 400, 'Invalid JSON body');
    // Valid JSON, so the hint says which key is refused, as on the notification API.
    expect(poisoned.json().hint).toBe(PROTOTYPE_KEY_HINT);
    // A byte order mark before the JSON, as some Windows tools write, is not an error.
    expect((await admin.post('/projects', '\uFEFF{"name":"with-bom"}')).statusCode).toBe(201);
    // Bytes that are not UTF-8 (a Latin-1 é) are not JSON text, however they would decode.
    const latin1 = await ctx.app.inject({
      method: 'POST',
      url: `${ADMIN}/projects`,
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      payload: Buffer.from('{"name":"caf\xe9"}', 'latin1'),
    });
    expectError(latin1, 400, 'Invalid JSON body');
    expect(latin1.json().hint).toBe(NOT_UTF8_HINT);
    const typed = await ctx.app.inject({
      method: 'POST',
      url: `${ADMIN}/projects`,
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'text/plain' },
      payload: 'name=shop',
    });
    expectError(typed, 415, 'Content-Type must be application/json');
    expect(await ctx.services.projects.list()).not.toContainEqual(expect.objectContaining({ name: 'y' }));
  });

  it('take an empty body as none, whatever Content-Type comes with it', async () => {
    const { name } = await seedProject(ctx.services);
    const rotated = await ctx.app.inject({
      method: 'POST',
      url: `${ADMIN}/projects/${name}/rotate-key`,
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    });
    expect(ok(rotated).api_key).toMatch(/^hrl_/);
  });

  it('get 405 with Allow for a wrong method, and the not-found page for a wrong path', async () => {
    const wrong = await admin.put('/projects', { name: 'x' });
    expectError(wrong, 405, 'Method PUT is not allowed here; use GET, HEAD, POST');
    expect(wrong.headers.allow).toBe('GET, HEAD, POST');
    // The method is what is wrong, whatever the query says.
    expectError(
      await admin.put('/projects?x=1', { name: 'x' }),
      405,
      'Method PUT is not allowed here; use GET, HEAD, POST',
    );
    expect((await admin.post('/projects/x/templates/y', {})).headers.allow).toBe('DELETE, GET, HEAD, PUT');
    expectNotFoundPage(await admin.get('/nothing-here'));
    expectNotFoundPage(await admin.get('/projects/x/templates/y/z/w'));
  });
});

describe(`the rate limit per token (${backend})`, () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ HERALD_ADMIN_RATE_LIMIT: '3' });
  });
  afterAll(() => limited?.close());

  it('answers 429 with Retry-After past the limit, per token, and calls without a token do not count', async () => {
    const a = await adminClient(limited.app, limited.services, 'a');
    const b = await adminClient(limited.app, limited.services, 'b');
    for (let i = 0; i < 5; i++) await limited.app.inject({ url: `${ADMIN}/projects` });
    for (let i = 0; i < 3; i++) {
      const response = await a.get('/projects');
      expect(response.statusCode).toBe(200);
      expect(response.headers['x-ratelimit-remaining']).toBe(String(2 - i));
    }
    const refused = await a.get('/projects');
    expectError(refused, 429, /^Rate limit of 3 calls per minute for this admin token exceeded; retry in/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect((await b.get('/projects')).statusCode).toBe(200);
    await limited.services.auditLog.flush();
    const entries = await limited.services.auditLog.list({ limit: 10 });
    expect(entries.filter((e) => e.token_name === 'a').map((e) => e.status_code)).toEqual([
      429, 200, 200, 200,
    ]);
  });
});
