import { describe, expect, it } from 'vitest';
import { csrfOf, dashboardSuite } from '../helpers/dashboard.js';

/** Revoking admin tokens from the dashboard's Tokens page, once and again. */

const suite = dashboardSuite();

describe('revoking an admin token from the dashboard', () => {
  it('revokes it, and says so; a second revoke says it was revoked already', async () => {
    const { token } = await suite.ctx.services.adminTokens.create('deploy');
    const csrf = csrfOf(await suite.client.get('/tokens'));
    const revoke = () => suite.client.post(`/tokens/${token.id}/revoke`, { confirm: 'yes' }, csrf);

    const first = await revoke();
    expect(first.statusCode).toBe(303);
    expect(first.headers.location).toBe('/tokens?notice=revoked');
    const [listed] = await suite.ctx.services.adminTokens.list();
    expect(listed?.revokedAt).not.toBeNull();

    const again = await revoke();
    expect(again.statusCode).toBe(303);
    expect(again.headers.location).toBe('/tokens?notice=unchanged');
    expect((await suite.client.get('/tokens?notice=unchanged')).body).toContain(
      'That token was revoked already: nothing changed.',
    );
    // The time it was revoked is the first revoke's.
    expect((await suite.ctx.services.adminTokens.list())[0]?.revokedAt).toBe(listed?.revokedAt);
  });
});
