import { SMTPServer } from 'smtp-server';
import { describe, expect, it } from 'vitest';
import { deadRelay, freePort } from '../helpers/dead-relays.js';
import { relayTests } from '../helpers/relay-tests.js';
import { seedProject } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §10, a fallback relay, with real relays: after a transient failure on the primary, or
 * while it is down, the next attempt goes through the fallback at once; a 5xx is final; with the
 * fallback down too, mail is retried as usual and nothing is lost; a project's fallback obeys the
 * outbound rules of §8 as its primary does, the operator's is trusted as HERALD_SMTP_URL is.
 *
 * Retries wait a minute here unless a test says otherwise: a message that arrives within the
 * tests' waits went through the fallback at once, without a back-off.
 */

const { start, cleanup, sink, projectVia, send, status, finalStatus, attempts } = relayTests({
  env: {
    HERALD_SMTP_TIMEOUT_MS: '2000',
    HERALD_DELIVERY_RETRY_BASE_MS: '60000',
    HERALD_DELIVERY_MAX_ATTEMPTS: '3',
  },
});

const local = (port: number) => `smtp://127.0.0.1:${port}?security=none`;

describe('a fallback relay', () => {
  it('takes the next attempt at once when the primary refuses connections', { timeout: 60_000 }, async () => {
    await start();
    const fallback = await sink();
    const { apiKey } = await projectVia(local(await freePort()), fallback.url);
    const id = await send(apiKey);
    expect(await finalStatus(apiKey, id)).toMatchObject({ status: 'sent', relay: 'fallback', attempts: 2 });
    expect(await attempts(id)).toEqual([
      { relay: 'primary', outcome: 'retry', response: expect.stringMatching(/ECONNREFUSED/) },
      { relay: 'fallback', outcome: 'sent', response: expect.stringMatching(/^250/) },
    ]);
    expect(fallback.messages).toHaveLength(1);
  });

  it(
    'takes every attempt while the primary is down, without a connection to the primary',
    { timeout: 60_000 },
    async () => {
      const ctx = await start();
      const fallback = await sink();
      const primary = await deadRelay('refuses', ctx.services.mailer);
      const seeded = await projectVia(local(primary.port), fallback.url);
      const first = await Promise.all(
        [1, 2, 3, 4, 5, 6].map((n) => send(seeded.apiKey, `u${n}@example.org`)),
      );
      for (const id of first)
        expect(await finalStatus(seeded.apiKey, id)).toMatchObject({ relay: 'fallback' });
      await waitUntil(
        async () => ((await ctx.services.smtpSettings.relays(seeded.projectId))[0]?.down ? true : undefined),
        { what: 'the primary to be judged down' },
      );
      const dialled = primary.connections.length;
      const id = await send(seeded.apiKey, 'later@example.org');
      expect(await finalStatus(seeded.apiKey, id)).toMatchObject({
        status: 'sent',
        relay: 'fallback',
        attempts: 1,
      });
      expect(await attempts(id)).toEqual([
        { relay: 'fallback', outcome: 'sent', response: expect.any(String) },
      ]);
      // Only probes reach the primary now, and the first comes after 5 s.
      expect(primary.connections.length).toBe(dialled);
    },
  );

  it('takes the next attempt at once after a 451 on the primary', { timeout: 60_000 }, async () => {
    await start();
    const primary = await sink();
    primary.failNext = { count: 1, code: 451, message: '4.3.0 Temporary local problem' };
    const fallback = await sink();
    const { apiKey } = await projectVia(primary.url, fallback.url);
    const id = await send(apiKey);
    expect(await finalStatus(apiKey, id)).toMatchObject({ status: 'sent', relay: 'fallback' });
    expect(await attempts(id)).toEqual([
      { relay: 'primary', outcome: 'retry', response: expect.stringMatching(/^SMTP 451/) },
      { relay: 'fallback', outcome: 'sent', response: expect.any(String) },
    ]);
    expect(primary.messages).toHaveLength(0);
    expect(fallback.messages).toHaveLength(1);
  });

  it('is none when it is the primary itself: the retry waits its back-off', { timeout: 60_000 }, async () => {
    const ctx = await start();
    const primary = await sink();
    primary.failNext = { count: 1, code: 451, message: '4.3.0 Temporary local problem' };
    const other = await sink();
    const { apiKey, projectId } = await projectVia(primary.url, other.url);
    // Settings that name one relay twice, written past the check of a save.
    await ctx.services.storage.db
      .updateTable('smtp_settings')
      .set({ fallback_host: '127.0.0.1', fallback_port: primary.port })
      .where('project_id', '=', projectId)
      .execute();
    const id = await send(apiKey);
    const after = await waitUntil(
      async () => {
        const body = await status(apiKey, id);
        return body.attempts >= 1 && (body.status !== 'queued' || body.next_attempt_at) ? body : undefined;
      },
      { what: 'the first attempt to be recorded' },
    );
    expect(after).toMatchObject({ status: 'queued', attempts: 1 });
    // The back-off (30 to 60 s here), not an attempt at once through the same relay.
    expect(Date.parse(after.next_attempt_at!) - Date.now()).toBeGreaterThan(20_000);
    expect(await attempts(id)).toEqual([
      { relay: 'primary', outcome: 'retry', response: expect.stringMatching(/^SMTP 451/) },
    ]);
    expect(primary.messages).toHaveLength(0);
  });

  it("takes the message at once when the primary refuses Herald's login: a setting, not the message", async () => {
    await start();
    const primary = new SMTPServer({
      allowInsecureAuth: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onAuth: (_auth, _session, callback) => callback(new Error('Invalid username or password')),
    });
    await new Promise<void>((resolve) => primary.listen(0, '127.0.0.1', resolve));
    cleanup(() => new Promise<void>((resolve) => primary.close(() => resolve())));
    const port = (primary.server.address() as { port: number }).port;
    const fallback = await sink();
    const { apiKey } = await projectVia(`smtp://herald:wrong@127.0.0.1:${port}?security=none`, fallback.url);
    const id = await send(apiKey);
    expect(await finalStatus(apiKey, id)).toMatchObject({ status: 'sent', attempts: 2, relay: 'fallback' });
    expect(await attempts(id)).toEqual([
      {
        relay: 'primary',
        outcome: 'retry',
        response: expect.stringMatching(
          /^SMTP 535 .*\(the relay refused Herald's login: check the SMTP user and password\)$/,
        ),
      },
      { relay: 'fallback', outcome: 'sent', response: expect.any(String) },
    ]);
    expect(fallback.messages).toHaveLength(1);
  });

  it('is never contacted after a 550 5.1.1 on the primary: it is final', { timeout: 60_000 }, async () => {
    await start();
    const primary = await sink();
    primary.rejectRecipients.set('nobody@example.org', [
      550,
      '5.1.1 <nobody@example.org>: Recipient address rejected',
    ]);
    const fallback = await sink();
    const { apiKey } = await projectVia(primary.url, fallback.url);
    const id = await send(apiKey, 'nobody@example.org');
    const body = await finalStatus(apiKey, id);
    expect(body).toMatchObject({
      status: 'failed',
      attempts: 1,
      bounce: { type: 'hard', category: 'user_unknown', status: '5.1.1' },
    });
    expect(body.relay).toBeUndefined();
    expect(await attempts(id)).toEqual([
      { relay: 'primary', outcome: 'failed', response: expect.stringMatching(/^SMTP 550 5\.1\.1/) },
    ]);
    expect(fallback.messages).toHaveLength(0);
  });

  it(
    'down as well: mail is retried as usual and none is lost when the fallback returns',
    { timeout: 120_000 },
    async () => {
      await start({ HERALD_DELIVERY_RETRY_BASE_MS: '300', HERALD_DELIVERY_MAX_ATTEMPTS: '10' });
      const fallbackPort = await freePort();
      const { apiKey } = await projectVia(local(await freePort()), local(fallbackPort));
      const ids = await Promise.all(Array.from({ length: 10 }, (_, n) => send(apiKey, `u${n}@example.org`)));
      // Both relays refuse for a while: every message has failed attempts on both.
      await waitUntil(
        async () => {
          for (const id of ids)
            if (new Set((await attempts(id)).map((a) => a.relay)).size < 2) return undefined;
          return true;
        },
        { timeoutMs: 30_000, what: 'attempts on both relays' },
      );
      const fallback = await sink(fallbackPort);
      await fallback.waitFor(ids.length, 60_000);
      for (const id of ids)
        expect(await finalStatus(apiKey, id)).toMatchObject({ status: 'sent', relay: 'fallback' });
      const delivered = fallback.messages.map((m) => m.parsed.headers.get('x-herald-request-id'));
      expect(delivered.sort()).toEqual([...ids].sort());
    },
  );
});

describe('a fallback relay in production', () => {
  it(
    "obeys the outbound rules as the project's primary does; Herald's own is trusted",
    { timeout: 60_000 },
    async () => {
      const fallback = await sink();
      const refusing = await freePort();
      const globalFallback = await sink();
      const ctx = await start({
        NODE_ENV: 'production',
        // The project's primary may be reached; its fallback on loopback may not.
        HERALD_OUTBOUND_ALLOW: `127.0.0.1:${refusing}`,
        HERALD_SMTP_URL: local(await freePort()),
        HERALD_SMTP_FALLBACK_URL: globalFallback.url,
      });
      // An address the rules refuse is refused when it is saved, primary or fallback alike, in
      // whatever form an address may be written.
      const refused = await seedProject(ctx.services);
      const to = (host: string, port: number) => `smtp://${host}:${port}?security=none`;
      for (const [primary, fallbackUrl, what, host] of [
        [local(await freePort()), null, 'SMTP', '127.0.0.1'],
        [to('2130706433', await freePort()), null, 'SMTP', '127.0.0.1'],
        [local(refusing), fallback.url, 'Fallback SMTP', '127.0.0.1'],
        [local(refusing), to('127.1', fallback.port), 'Fallback SMTP', '127.0.0.1'],
        [local(refusing), to('0x7f.0.0.1.', fallback.port), 'Fallback SMTP', '127.0.0.1'],
        [local(refusing), to('[::1]', fallback.port), 'Fallback SMTP', '::1'],
      ] as const)
        await expect(
          ctx.services.smtpSettings.setFromUrl(refused.projectId, primary, { fallbackUrl }),
        ).rejects.toThrow(
          `${what} host ${host} is not allowed: loopback addresses are refused in production unless ` +
            'HERALD_OUTBOUND_ALLOW lists them; use a public address or a host name',
        );
      expect(await ctx.services.smtpSettings.get(refused.projectId)).toBeNull();
      // The allowed address, written another way, is stored as the address it is.
      await ctx.services.smtpSettings.setFromUrl(refused.projectId, to('127.1', refusing));
      expect(await ctx.services.smtpSettings.get(refused.projectId)).toMatchObject({
        host: '127.0.0.1',
        port: refusing,
      });

      // A name is judged when mail goes out, on what it resolves to then.
      const own = await projectVia(local(refusing), `smtp://localhost:${fallback.port}?security=none`);
      const id = await send(own.apiKey);
      const body = await finalStatus(own.apiKey, id);
      expect(body).toMatchObject({ status: 'failed', attempts: 2 });
      expect(body.error_message).toMatch(/not allowed.*HERALD_OUTBOUND_ALLOW/);
      expect(await attempts(id)).toEqual([
        { relay: 'primary', outcome: 'retry', response: expect.stringMatching(/ECONNREFUSED/) },
        { relay: 'fallback', outcome: 'failed', response: expect.stringMatching(/not allowed/) },
      ]);
      expect(fallback.messages).toHaveLength(0);

      // A project without settings of its own: HERALD_SMTP_URL, then HERALD_SMTP_FALLBACK_URL.
      const plain = await seedProject(ctx.services);
      const global = await send(plain.apiKey);
      expect(await finalStatus(plain.apiKey, global)).toMatchObject({ status: 'sent', relay: 'fallback' });
      expect(globalFallback.messages).toHaveLength(1);
    },
  );
});
