import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { dashboardPlugin } from '../../src/dashboard/plugin.js';
import { buildApp } from '../../src/http/app.js';
import { createTestContext, type TestContext } from './services.js';

/**
 * The app with the dashboard mounted, and the session token of a signed-in admin, for tests that
 * read dashboard pages through `inject` (cookie `herald_session`).
 */
export async function dashboardApp(ctx: TestContext): Promise<{ app: FastifyInstance; session: string }> {
  const app = await buildApp({
    ...ctx.services,
    plugins: [(instance) => dashboardPlugin(instance, ctx.services)],
  });
  await app.ready();
  const admin = await ctx.services.admins.create('admin@herald.example', 'a long enough password');
  return { app, session: (await ctx.services.admins.startSession(admin)).token };
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** The CSRF token of the first form on a dashboard page. */
export function csrfOf(page: LightMyRequestResponse): string {
  const token = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
  if (token === undefined) throw new Error(`no CSRF token on the page (status ${page.statusCode})`);
  return token;
}

/** Dashboard requests as a signed-in admin's browser makes them, through `inject`. */
export interface DashboardClient {
  get(url: string): Promise<LightMyRequestResponse>;
  /** A form POST with `token` as its CSRF field (none when null); repeated fields as arrays. */
  post(
    url: string,
    fields: Record<string, string | readonly string[]>,
    token: string | null,
  ): Promise<LightMyRequestResponse>;
}

export function dashboardClient(app: FastifyInstance, session: string): DashboardClient {
  return {
    get: (url) => app.inject({ url, cookies: { herald_session: session } }),
    post: (url, fields, token) => {
      const body = new URLSearchParams();
      if (token !== null) body.append('_csrf', token);
      for (const [name, value] of Object.entries(fields))
        for (const v of typeof value === 'string' ? [value] : value) body.append(name, v);
      return app.inject({
        method: 'POST',
        url,
        headers: FORM,
        cookies: { herald_session: session },
        payload: body.toString(),
      });
    },
  };
}

/** A suite's test context and signed-in dashboard client, set before its first test. */
export interface DashboardSuite {
  readonly ctx: TestContext;
  readonly client: DashboardClient;
}

/**
 * Registers the hooks of a suite that reads dashboard pages as a signed-in admin: a new test
 * context and the dashboard app before the suite's tests, both closed after them. The fields of
 * what it returns are there once the suite's first `beforeAll` has run.
 */
export function dashboardSuite(): DashboardSuite {
  const suite = {} as { ctx: TestContext; client: DashboardClient };
  let close = async () => {};
  beforeAll(async () => {
    suite.ctx = await createTestContext();
    const { app, session } = await dashboardApp(suite.ctx);
    close = () => app.close();
    suite.client = dashboardClient(app, session);
  });
  afterAll(async () => {
    await close();
    await suite.ctx?.close();
  });
  return suite;
}
