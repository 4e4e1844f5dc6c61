import { createHash } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { dashboardPlugin } from '../../src/dashboard/plugin.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/logger.js';
import { AdminService } from '../../src/services/admins.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { seedProject, testEnv } from '../helpers/services.js';

/**
 * The dashboard's authentication and request protections, through `inject` on the same app the
 * api role serves: setup link, login, sessions, CSRF, rate limits, headers, and that the JSON API
 * keeps its own behaviour beside the dashboard.
 */

interface Dashboard {
  readonly services: Services;
  readonly app: FastifyInstance;
  readonly admins: AdminService;
  close(): Promise<void>;
}

async function openDashboard(
  env: Record<string, string> = {},
): Promise<Dashboard & { database: TestDatabase }> {
  const database = await freshDatabase();
  const config = loadConfig(testEnv(database, env));
  const services = await openServices(config, createLogger('silent'));
  const app = await buildApp({ ...services, plugins: [(instance) => dashboardPlugin(instance, services)] });
  await app.ready();
  return {
    database,
    services,
    app,
    admins: new AdminService(services.storage.db),
    async close() {
      await app.close();
      await closeServices(services);
      await database.drop();
    },
  };
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

function cookie(response: LightMyRequestResponse, name: string): string | undefined {
  return response.cookies.find((c) => c.name === name)?.value;
}

function csrfField(html: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(html);
  if (match === null) throw new Error('no CSRF field on the page');
  return match[1]!;
}

/** Logs in through the forms, as a browser would; returns the session cookie and its CSRF token. */
async function logIn(
  app: FastifyInstance,
  email: string,
  password: string,
  extraCookies: Record<string, string> = {},
  remoteAddress = '127.0.0.1',
): Promise<{ session: string; csrf: string; response: LightMyRequestResponse }> {
  const form = await app.inject({ url: '/login', remoteAddress });
  const pre = cookie(form, 'herald_csrf')!;
  const response = await app.inject({
    method: 'POST',
    url: '/login',
    remoteAddress,
    cookies: { herald_csrf: pre, ...extraCookies },
    payload: encode({ _csrf: csrfField(form.body), email, password, next: '/projects' }),
    headers: FORM,
  });
  const session = cookie(response, 'herald_session') ?? '';
  let csrf = '';
  if (session !== '') {
    const page = await app.inject({ url: '/projects', cookies: { herald_session: session } });
    csrf = csrfField(page.body);
  }
  return { session, csrf, response };
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const encode = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const PASSWORD = 'a long enough password';

let d: Dashboard & { database: TestDatabase };
beforeAll(async () => {
  d = await openDashboard();
});
afterAll(() => d.close());

describe('the JSON API keeps its behaviour beside the dashboard', () => {
  it('answers 415 to a form body and a page to an unknown API path', async () => {
    const { apiKey } = await seedProject(d.services);
    const form = await d.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${apiKey}`, ...FORM },
      payload: 'template=user_created&to=jane%40example.org',
    });
    expect(form.statusCode).toBe(415);
    expect(form.json()).toEqual({ error: 'Content-Type must be application/json' });
    const unknown = await d.app.inject({ url: '/api/v1/nothing-here' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers['content-type']).toMatch(/^text\/html/);
    const dashboardUnknown = await d.app.inject({ url: '/no-such-page' });
    expect(dashboardUnknown.statusCode).toBe(404);
  });
});

describe('setup link', () => {
  it('creates the first admin once, needs its form token, and stores only hashes', async () => {
    const token = await d.admins.createSetupToken();
    const stored = await d.services.storage.db.selectFrom('settings').select('key').execute();
    expect(stored.map((r) => r.key).join()).not.toContain(token);
    expect(stored.map((r) => r.key)).toContain(`setup-token:${sha256(token)}`);

    const form = await d.app.inject({ url: `/setup/${token}` });
    expect(form.statusCode).toBe(200);
    const payload = { email: 'first@herald.example', password: PASSWORD, confirm: PASSWORD };
    const forged = await d.app.inject({
      method: 'POST',
      url: `/setup/${token}`,
      headers: FORM,
      payload: encode(payload),
    });
    expect(forged.statusCode).toBe(403);

    const created = await d.app.inject({
      method: 'POST',
      url: `/setup/${token}`,
      headers: FORM,
      cookies: { herald_csrf: cookie(form, 'herald_csrf')! },
      payload: encode({ ...payload, _csrf: csrfField(form.body) }),
    });
    expect(created.statusCode).toBe(303);
    expect(created.headers.location).toBe('/projects?notice=welcome');
    const setCookie = String(created.headers['set-cookie']);
    expect(setCookie).toMatch(/herald_session=[^;]+; Path=\/; Expires=[^;]+; HttpOnly; SameSite=Lax/);
    expect(setCookie).not.toMatch(/Secure/);

    const admin = await d.services.storage.db.selectFrom('admins').selectAll().executeTakeFirstOrThrow();
    expect(admin.email).toBe('first@herald.example');
    expect(admin.password_hash).toMatch(/^\$scrypt\$ln=17,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);

    expect((await d.app.inject({ url: `/setup/${token}` })).statusCode).toBe(404);
    expect(await d.admins.isSetupTokenValid(await d.admins.createSetupToken())).toBe(false);
  });
});

describe('sessions', () => {
  it('redirects pages to the login and refuses state changes without a session', async () => {
    const page = await d.app.inject({ url: '/messages?status=sent' });
    expect(page.statusCode).toBe(302);
    expect(page.headers.location).toBe('/login?next=%2Fmessages%3Fstatus%3Dsent');
    const post = await d.app.inject({ method: 'POST', url: '/projects', headers: FORM, payload: 'name=x' });
    expect(post.statusCode).toBe(403);
  });

  it('stores only the SHA-256 of the session id and gives a new id at every login', async () => {
    const first = await logIn(d.app, 'first@herald.example', PASSWORD);
    expect(first.response.statusCode).toBe(303);
    const rows = await d.services.storage.db.selectFrom('sessions').select('id_hash').execute();
    expect(rows.map((r) => r.id_hash)).toContain(sha256(first.session));
    expect(rows.map((r) => r.id_hash)).not.toContain(first.session);

    // Logging in while holding a session replaces it: the old id stops working.
    const second = await logIn(d.app, 'first@herald.example', PASSWORD, { herald_session: first.session });
    expect(second.session).not.toBe(first.session);
    const old = await d.app.inject({ url: '/projects', cookies: { herald_session: first.session } });
    expect(old.statusCode).toBe(302);

    const out = await d.app.inject({
      method: 'POST',
      url: '/logout',
      headers: FORM,
      cookies: { herald_session: second.session },
      payload: encode({ _csrf: second.csrf }),
    });
    expect(out.statusCode).toBe(303);
    const after = await d.app.inject({ url: '/projects', cookies: { herald_session: second.session } });
    expect(after.statusCode).toBe(302);
  });

  it('drops an off-site return address after login', async () => {
    const form = await d.app.inject({ url: '/login?next=//evil.example/x' });
    expect(form.body).toContain('name="next" value="/projects"');
  });

  it('keeps every return address on this site, with or without a session', async () => {
    const { session } = await logIn(d.app, 'first@herald.example', PASSWORD);
    for (const next of [
      '/%09/evil.example/x',
      '/%0a/evil.example/x',
      '/%20/evil.example',
      '/%5Cevil.example',
      'https://evil.example/',
      '/projects%0d%0aSet-Cookie:%20x=1',
    ]) {
      const form = await d.app.inject({ url: `/login?next=${next}` });
      expect(form.statusCode, next).toBe(200);
      expect(form.body, next).toContain('name="next" value="/projects"');
      const again = await d.app.inject({ url: `/login?next=${next}`, cookies: { herald_session: session } });
      expect(again.statusCode, next).toBe(302);
      expect(again.headers.location, next).toBe('/projects');
    }
  });

  it('keeps a same-site return address with its query', async () => {
    const form = await d.app.inject({ url: '/login?next=%2Fmessages%3Fstatus%3Dsent' });
    expect(form.body).toContain('name="next" value="/messages?status=sent"');
  });

  it('ends every session of an admin whose password changes', async () => {
    const a = await logIn(d.app, 'first@herald.example', PASSWORD);
    const b = await logIn(d.app, 'first@herald.example', PASSWORD);
    const next = 'another long password';
    const changed = await d.app.inject({
      method: 'POST',
      url: '/account/password',
      headers: FORM,
      cookies: { herald_session: a.session },
      payload: encode({ _csrf: a.csrf, current: PASSWORD, password: next, confirm: next }),
    });
    expect(changed.statusCode).toBe(303);
    const fresh = cookie(changed, 'herald_session')!;
    expect(fresh).not.toBe(a.session);
    for (const old of [a.session, b.session])
      expect((await d.app.inject({ url: '/projects', cookies: { herald_session: old } })).statusCode).toBe(
        302,
      );
    expect((await d.app.inject({ url: '/projects', cookies: { herald_session: fresh } })).statusCode).toBe(
      200,
    );
    expect((await logIn(d.app, 'first@herald.example', next)).response.statusCode).toBe(303);
    expect((await logIn(d.app, 'first@herald.example', PASSWORD)).response.statusCode).toBe(401);
  });
});

describe('CSRF and headers', () => {
  it('needs the session token on every POST, as a field or an X-CSRF-Token header', async () => {
    const { session, csrf } = await logIn(d.app, 'first@herald.example', 'another long password');
    const post = (headers: Record<string, string>, payload: Record<string, string>) =>
      d.app.inject({
        method: 'POST',
        url: '/projects',
        headers: { ...FORM, ...headers },
        cookies: { herald_session: session },
        payload: encode(payload),
      });
    expect((await post({}, { name: 'no-token' })).statusCode).toBe(403);
    expect((await post({}, { name: 'wrong-token', _csrf: csrf.slice(1) + 'x' })).statusCode).toBe(403);
    expect(
      (await post({ 'sec-fetch-site': 'cross-site' }, { name: 'cross-site', _csrf: csrf })).statusCode,
    ).toBe(403);
    expect((await post({}, { name: 'by-field', _csrf: csrf })).statusCode).toBe(201);
    expect((await post({ 'x-csrf-token': csrf }, { name: 'by-header' })).statusCode).toBe(201);
    const names = (await d.services.projects.list()).map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(['by-field', 'by-header']));
    expect(names).not.toEqual(expect.arrayContaining(['no-token']));
  });

  it('sends a strict CSP and the other security headers on pages', async () => {
    const response = await d.app.inject({ url: '/login' });
    const csp = String(response.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(response.headers['x-frame-options']).toBe('DENY');
    expect(response.headers['x-content-type-options']).toBe('nosniff');
    expect(response.headers['referrer-policy']).toBe('same-origin');
    expect(response.headers['cache-control']).toBe('no-store');
  });

  it('serves its assets with long caching under a content hash', async () => {
    const page = await d.app.inject({ url: '/login' });
    const src = /<script src="(\/assets\/htmx\.min\.js\?v=[0-9a-f]+)"/.exec(page.body)![1]!;
    const asset = await d.app.inject({ url: src });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toContain('immutable');
  });
});

describe('login throttling', () => {
  it('refuses the 11th attempt for one email within 15 minutes with 429', { timeout: 120_000 }, async () => {
    for (let i = 0; i < 10; i++)
      expect((await logIn(d.app, 'guess@herald.example', `wrong password ${i}`)).response.statusCode).toBe(
        401,
      );
    const limited = await logIn(d.app, 'guess@herald.example', 'wrong password 10');
    expect(limited.response.statusCode).toBe(429);
    expect(limited.response.body).toContain('Too many login attempts');
    expect(limited.response.headers['retry-after']).toBeDefined();
  });
});

describe('login throttling cannot be turned against an admin', () => {
  const status = async (app: FastifyInstance, email: string, password: string, from: string) =>
    (await logIn(app, email, password, {}, from)).response.statusCode;

  it(
    'failures for a variant of the email from elsewhere leave the admin able to log in',
    { timeout: 60_000 },
    async () => {
      await d.admins.create('victim@herald.example', PASSWORD);
      for (let i = 0; i < 10; i++)
        expect(await status(d.app, 'VICTIM@herald.example ', `wrong ${i}`, '198.51.100.7')).toBe(401);
      // The stranger is held back...
      expect(await status(d.app, 'victim@herald.example', PASSWORD, '198.51.100.7')).toBe(429);
      // ...the admin, from their own address, is not.
      expect(await status(d.app, 'victim@herald.example', PASSWORD, '203.0.113.20')).toBe(303);
    },
  );

  it('counts only failures: an admin may log in any number of times', { timeout: 120_000 }, async () => {
    await d.admins.create('often@herald.example', PASSWORD);
    for (let i = 0; i < 12; i++)
      expect(await status(d.app, 'often@herald.example', PASSWORD, '203.0.113.30')).toBe(303);
  });

  it(
    'counts an IPv6 client by its /64, so it cannot walk its own network',
    { timeout: 120_000 },
    async () => {
      for (let i = 0; i < 10; i++)
        expect(await status(d.app, 'walker@herald.example', `wrong ${i}`, `2001:db8:77:1::${i + 1}`)).toBe(
          401,
        );
      expect(await status(d.app, 'walker@herald.example', 'wrong', '2001:db8:77:1:ffff::1')).toBe(429);
    },
  );

  it('shares the count between api processes', { timeout: 120_000 }, async () => {
    // A second process on the same database: its own services, its own app.
    const config = loadConfig(testEnv(d.database));
    const other = await openServices(config, createLogger('silent'));
    const app = await buildApp({ ...other, plugins: [(instance) => dashboardPlugin(instance, other)] });
    await app.ready();
    try {
      for (let i = 0; i < 10; i++)
        expect(
          await status(i % 2 === 0 ? d.app : app, 'shared@herald.example', `wrong ${i}`, '198.51.100.9'),
        ).toBe(401);
      expect(await status(app, 'shared@herald.example', 'wrong', '198.51.100.9')).toBe(429);
      expect(await status(d.app, 'shared@herald.example', 'wrong', '198.51.100.9')).toBe(429);
      const metrics = await other.metrics.render();
      expect(metrics).toMatch(/herald_dashboard_logins_total\{outcome="failure"\} 5/);
      expect(metrics).toMatch(/herald_dashboard_logins_total\{outcome="throttled"\} 1/);
    } finally {
      await app.close();
      await closeServices(other);
    }
  });
});

describe('behind HTTPS', () => {
  it('refuses a POST from another origin than the public one, with a valid token', async () => {
    const secure = await openDashboard({ HERALD_PUBLIC_URL: 'https://herald.example/' });
    try {
      await secure.admins.create('origin@herald.example', PASSWORD);
      const { session, csrf } = await logIn(secure.app, 'origin@herald.example', PASSWORD);
      const post = (origin: string | null, name: string) =>
        secure.app.inject({
          method: 'POST',
          url: '/projects',
          headers: { ...FORM, ...(origin === null ? {} : { origin }) },
          cookies: { herald_session: session },
          payload: encode({ name, _csrf: csrf }),
        });
      for (const origin of [
        'https://evil.example',
        'http://herald.example',
        'https://herald.example:8443',
        'null',
      ])
        expect((await post(origin, 'foreign')).statusCode, origin).toBe(403);
      expect((await post('https://herald.example', 'same-origin')).statusCode).toBe(201);
      // A client that sends no Origin (an old browser, a script with the token) is judged by its token.
      expect((await post(null, 'no-origin')).statusCode).toBe(201);
      expect((await secure.services.projects.list()).map((p) => p.name).sort()).toEqual([
        'no-origin',
        'same-origin',
      ]);
    } finally {
      await secure.close();
    }
  });

  it('marks the session cookie Secure and sends HSTS when the public URL is https', async () => {
    const secure = await openDashboard({ HERALD_PUBLIC_URL: 'https://herald.example' });
    try {
      await secure.admins.create('tls@herald.example', PASSWORD);
      const { response } = await logIn(secure.app, 'tls@herald.example', PASSWORD);
      expect(String(response.headers['set-cookie'])).toMatch(/herald_session=[^;]+;.*; Secure/);
      expect(response.headers['strict-transport-security']).toBe('max-age=31536000');
    } finally {
      await secure.close();
    }
  });
});
