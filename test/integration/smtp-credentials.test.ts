import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** product.md §8: a stored SMTP password never follows a change of host, port or username. */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

const BASE = { host: 'relay.example', port: 587, security: 'starttls' as const, username: 'mailer' };

describe('stored SMTP password', () => {
  it.each([
    ['host', { host: 'attacker.example' }],
    ['port', { port: 2525 }],
    ['username', { username: 'someone-else' }],
  ])('is dropped when the %s changes and no new password is given', async (_field, change) => {
    const { projectId } = await seedProject(ctx.services);
    await ctx.services.smtpSettings.set(projectId, { ...BASE, password: 's3cret' });
    const view = await ctx.services.smtpSettings.set(projectId, { ...BASE, ...change });
    expect(view.hasPassword).toBe(false);
    const delivery = await ctx.services.smtpSettings.forDelivery(projectId);
    expect(delivery?.target.password).toBeNull();
  });

  it('is kept when only other fields change, and replaced when a new one is given', async () => {
    const { projectId } = await seedProject(ctx.services);
    await ctx.services.smtpSettings.set(projectId, { ...BASE, password: 's3cret' });
    await ctx.services.smtpSettings.set(projectId, { ...BASE, host: 'RELAY.example', fromName: 'Ops' });
    expect((await ctx.services.smtpSettings.forDelivery(projectId))?.target.password).toBe('s3cret');
    await ctx.services.smtpSettings.set(projectId, { ...BASE, host: 'new.example', password: 'n3w' });
    expect((await ctx.services.smtpSettings.forDelivery(projectId))?.target.password).toBe('n3w');
  });

  it('is kept for an address written another way, also one stored in that way', async () => {
    const { projectId } = await seedProject(ctx.services);
    const relay = { ...BASE, host: '2130706433' };
    await ctx.services.smtpSettings.set(projectId, { ...relay, password: 's3cret' });
    expect(await ctx.services.smtpSettings.get(projectId)).toMatchObject({ host: '127.0.0.1' });
    await ctx.services.smtpSettings.set(projectId, { ...relay, host: '127.1' });
    expect((await ctx.services.smtpSettings.forDelivery(projectId))?.target.password).toBe('s3cret');
    // A row saved before hosts were stored in their usual form.
    await ctx.services.storage.db
      .updateTable('smtp_settings')
      .set({ host: '127.1' })
      .where('project_id', '=', projectId)
      .execute();
    await ctx.services.smtpSettings.set(projectId, { ...relay, fromName: 'Ops' });
    expect((await ctx.services.smtpSettings.forDelivery(projectId))?.target.password).toBe('s3cret');
  });
});

describe('SMTP host', () => {
  it('refused as a URL says to give the host name alone', async () => {
    const { projectId } = await seedProject(ctx.services);
    const alone =
      'SMTP host is not valid: give the host name alone (mail.example.org), without smtp://, a user or a port';
    for (const host of ['smtp://mail.example.org', 'mailer@mail.example.org', 'mail.example.org/'])
      await expect(ctx.services.smtpSettings.set(projectId, { ...BASE, host })).rejects.toThrow(alone);
    await expect(ctx.services.smtpSettings.set(projectId, { ...BASE, host: 'mail example' })).rejects.toThrow(
      /^SMTP host is not valid$/,
    );
    expect(await ctx.services.smtpSettings.get(projectId)).toBeNull();
  });
});
