import { beforeAll, describe, expect, it } from 'vitest';
import { csrfOf, dashboardSuite } from '../helpers/dashboard.js';

/**
 * Removing admins from the dashboard's Admins page: the signed-in admin cannot remove itself,
 * however its address is typed (removing it would end the very session that asks).
 */

const suite = dashboardSuite();

beforeAll(async () => {
  await suite.ctx.services.admins.create('second@herald.example', 'a long enough password');
});

describe('removing an admin from the dashboard', () => {
  it('refuses to remove the signed-in admin under any spelling of its address', async () => {
    const csrf = csrfOf(await suite.client.get('/admins'));
    for (const typed of [
      'admin@herald.example',
      ' ADMIN@Herald.Example ',
      '<admin@herald.example>',
      'admin@ｈｅｒａｌｄ.example',
    ]) {
      const page = await suite.client.post('/admins/remove', { email: typed }, csrf);
      expect(page.statusCode, typed).toBe(400);
      expect(page.body, typed).toContain('You cannot remove yourself; another admin can.');
    }
    expect((await suite.ctx.services.admins.list()).map((admin) => admin.email).sort()).toEqual([
      'admin@herald.example',
      'second@herald.example',
    ]);
  });
});
