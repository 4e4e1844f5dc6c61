import type { FastifyInstance } from 'fastify';
import { dashboardPlugin } from '../../src/dashboard/plugin.js';
import { buildApp } from '../../src/http/app.js';
import type { TestContext } from './services.js';

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
