import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csrfOf, dashboardApp, dashboardClient, type DashboardClient } from '../helpers/dashboard.js';
import { createTestContext, type TestContext } from '../helpers/services.js';

/**
 * Removing admins from the dashboard's Admins page: the signed-in admin cannot remove itself,
 * however its address is typed (removing it would end the very session that asks).
 */

let ctx: TestContext;
let client: DashboardClient;
let close: () => Promise<void>;

beforeAll(async () => {
  ctx = await createTestContext();
  const { app, session } = await dashboardApp(ctx);
  close = () => app.close();
  client = dashboardClient(app, session);
  await ctx.services.admins.create('second@herald.example', 'a long enough password');
});
afterAll(async () => {
  await close?.();
  await ctx?.close();
});

describe('removing an admin from the dashboard', () => {
  it('refuses to remove the signed-in admin under any spelling of its address', async () => {
    const csrf = csrfOf(await client.get('/admins'));
    for (const typed of [
      'admin@herald.example',
      ' ADMIN@Herald.Example ',
      '<admin@herald.example>',
      'admin@ｈｅｒａｌｄ.example',
    ]) {
      const page = await client.post('/admins/remove', { email: typed }, csrf);
      expect(page.statusCode, typed).toBe(400);
      expect(page.body, typed).toContain('You cannot remove yourself; another admin can.');
    }
    expect((await ctx.services.admins.list()).map((admin) => admin.email).sort()).toEqual([
      'admin@herald.example',
      'second@herald.example',
    ]);
  });
});
