import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A relay that refuses Herald's login with 535 (src/mail/login-gate.ts): a wrong password is tried
 * once, not once per queued message, since providers lock an account after a few refused logins;
 * new settings are another login, tried at once.
 */

let ctx: TestContext | null = null;
let worker: Worker | null = null;
let relay: SMTPServer | null = null;

afterEach(async () => {
  await worker?.stop();
  await ctx?.close();
  await new Promise<void>((resolve) => (relay === null ? resolve() : relay.close(() => resolve())));
  worker = null;
  ctx = null;
  relay = null;
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
  relay = new SMTPServer({
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
  await new Promise<void>((resolve) => relay!.listen(0, '127.0.0.1', resolve));
  const { port } = relay.server.address() as { port: number };
  return { port, logins: () => logins, received: () => received };
}

async function start(env: Record<string, string> = {}): Promise<TestContext> {
  ctx = await createTestContext({
    HERALD_SMTP_TIMEOUT_MS: '5000',
    HERALD_DELIVERY_POLL_MS: '50',
    // No retry within a test: every attempt seen is a message's first.
    HERALD_DELIVERY_RETRY_BASE_MS: '60000',
    ...env,
  });
  worker = createWorker(ctx.services);
  worker.start();
  return ctx;
}

async function send(apiKey: string, to: string): Promise<string> {
  const response = await ctx!.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jane' } },
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

async function firstAttempt(requestId: string): Promise<{ outcome: string; response: string | null }> {
  return waitUntil(
    async () => {
      const { attempts } = await ctx!.services.notifications.detail(requestId);
      return attempts[0];
    },
    { timeoutMs: 20_000, intervalMs: 50, what: `${requestId}'s first attempt` },
  );
}

describe('a relay that refuses the login', () => {
  it('is given the login once, not once per queued message, until the settings change', async () => {
    const ctx = await start();
    const strict = await strictRelay();
    const { projectId, apiKey } = await seedProject(ctx.services);
    await ctx.services.smtpSettings.setFromUrl(
      projectId,
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
    const ctx = await start({ HERALD_SMTP_TIMEOUT_MS: '1000' });
    const strict = await strictRelay(1);
    const { projectId, apiKey } = await seedProject(ctx.services);
    await ctx.services.smtpSettings.setFromUrl(
      projectId,
      `smtp://herald:right@127.0.0.1:${strict.port}?security=none`,
    );
    const unanswered = await send(apiKey, 'first@example.org');
    expect(await firstAttempt(unanswered)).toMatchObject({ outcome: 'retry' });
    const next = await send(apiKey, 'next@example.org');
    expect(await firstAttempt(next)).toMatchObject({ outcome: 'sent' });
    expect(strict.logins()).toBe(2);
  });
});
