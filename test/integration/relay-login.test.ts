import { SMTPServer } from 'smtp-server';
import { describe, expect, it } from 'vitest';
import { relayTests } from '../helpers/relay-tests.js';

/**
 * A relay that refuses Herald's login with 535 (src/mail/login-gate.ts): a wrong password is tried
 * once, not once per queued message, since providers lock an account after a few refused logins;
 * new settings are another login, tried at once.
 */

const { start, cleanup, projectVia, send, firstAttempt } = relayTests({
  env: {
    HERALD_SMTP_TIMEOUT_MS: '5000',
    // No retry within a test: every attempt seen is a message's first.
    HERALD_DELIVERY_RETRY_BASE_MS: '60000',
  },
});

/**
 * A relay that takes the password `right` only, counting every login it is given; the first
 * `silentLogins` logins it never answers.
 */
async function strictRelay(
  silentLogins = 0,
): Promise<{ port: number; logins: () => number; received: () => number }> {
  let logins = 0;
  let received = 0;
  const relay = new SMTPServer({
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth: (auth, _session, callback) => {
      logins++;
      if (logins <= silentLogins) return;
      if (auth.password === 'right') callback(null, { user: auth.username });
      else callback(new Error('Authentication credentials invalid'));
    },
    onData: (stream, _session, callback) => {
      stream.resume();
      stream.on('end', () => {
        received++;
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  cleanup(() => new Promise<void>((resolve) => relay.close(() => resolve())));
  const { port } = relay.server.address() as { port: number };
  return { port, logins: () => logins, received: () => received };
}

describe('a relay that refuses the login', () => {
  it('is given the login once, not once per queued message, until the settings change', async () => {
    const ctx = await start();
    const strict = await strictRelay();
    const { projectId, apiKey } = await projectVia(
      `smtp://herald:wrong@127.0.0.1:${strict.port}?security=none`,
    );

    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await send(apiKey, `user${i}@example.org`));
    const firsts = await Promise.all(ids.map(firstAttempt));

    expect(strict.logins()).toBe(1);
    expect(firsts.every((attempt) => attempt.outcome === 'retry')).toBe(true);
    const responses = firsts.map((attempt) => attempt.response ?? '');
    const refused = responses.filter((response) => response.startsWith('SMTP 535 '));
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(/\(the relay refused Herald's login: check the SMTP user and password\)$/);
    const held = `Login not tried: ${refused[0]}; Herald tries this user and password again after `;
    for (const response of responses.filter((r) => !r.startsWith('SMTP 535 '))) {
      expect(response.startsWith(held)).toBe(true);
      expect(response.slice(held.length)).toMatch(
        /^\d\d:\d\d:\d\d UTC, or at once when the SMTP settings change$/,
      );
    }

    // A new password is another login: tried at once, and the mail goes.
    await ctx.services.smtpSettings.setFromUrl(
      projectId,
      `smtp://herald:right@127.0.0.1:${strict.port}?security=none`,
    );
    const fixed = await send(apiKey, 'jane@example.org');
    expect(await firstAttempt(fixed)).toMatchObject({ outcome: 'sent' });
    expect(strict.logins()).toBe(2);
    expect(strict.received()).toBe(1);
  });

  it('lets the next message log in when a login was never answered', async () => {
    await start({ HERALD_SMTP_TIMEOUT_MS: '1000' });
    const strict = await strictRelay(1);
    const { apiKey } = await projectVia(`smtp://herald:right@127.0.0.1:${strict.port}?security=none`);
    const unanswered = await send(apiKey, 'first@example.org');
    expect(await firstAttempt(unanswered)).toMatchObject({ outcome: 'retry' });
    const next = await send(apiKey, 'next@example.org');
    expect(await firstAttempt(next)).toMatchObject({ outcome: 'sent' });
    expect(strict.logins()).toBe(2);
  });
});
