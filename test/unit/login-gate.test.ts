import { describe, expect, it } from 'vitest';
import type { DeliveryFailure } from '../../src/domain/attempt.js';
import { LoginGate } from '../../src/mail/login-gate.js';
import { refusedCredentials, SmtpDeliveryError } from '../../src/mail/smtp-failures.js';

const refusal = (code: number) =>
  Object.assign(new Error('Invalid login'), {
    code: 'EAUTH',
    command: 'AUTH PLAIN',
    responseCode: code,
    response: `${code} 5.7.8 Authentication credentials invalid`,
  });

const judge = (error: unknown): DeliveryFailure => ({
  kind: 'transient',
  message: `SMTP ${(error as { response: string }).response}`,
  smtpCode: (error as { responseCode: number }).responseCode,
});

/** A gate on a clock the test moves, and a login the test answers. */
function gate() {
  let now = Date.parse('2026-11-30T12:00:00Z');
  const logins: { accept: () => void; refuse: (error: Error) => void }[] = [];
  const subject = new LoginGate(300_000, () => now);
  const login = () =>
    subject.login(
      () => new Promise<void>((accept, refuse) => logins.push({ accept, refuse })),
      refusedCredentials,
      judge,
    );
  return { subject, login, logins, advance: (ms: number) => (now += ms) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('the logins to one relay with one password', () => {
  it('go one at a time until one is accepted, then all at once', async () => {
    const { login, logins } = gate();
    const first = login();
    const second = login();
    await settle();
    expect(logins).toHaveLength(1);
    logins[0]!.accept();
    await first;
    await settle();
    expect(logins).toHaveLength(2);
    logins[1]!.accept();
    await second;
    const third = login();
    const fourth = login();
    await settle();
    expect(logins).toHaveLength(4);
    logins[2]!.accept();
    logins[3]!.accept();
    await Promise.all([third, fourth]);
  });

  it('are held after a 535: the waiting ones and the next fail without a login, until the hold ends', async () => {
    const { subject, login, logins, advance } = gate();
    const first = login();
    const waiting = login();
    await settle();
    logins[0]!.refuse(refusal(535));
    await expect(first).rejects.toThrow('Invalid login');
    const held = await waiting.then(
      () => null,
      (error: unknown) => error,
    );
    expect(held).toBeInstanceOf(SmtpDeliveryError);
    expect((held as SmtpDeliveryError).failure).toEqual({
      kind: 'transient',
      smtpCode: 535,
      message:
        'Login not tried: SMTP 535 5.7.8 Authentication credentials invalid; Herald tries this user ' +
        'and password again after 12:05:00 UTC, or at once when the SMTP settings change',
    });
    expect(subject.held()?.message).toMatch(/^Login not tried: /);
    await expect(login()).rejects.toBeInstanceOf(SmtpDeliveryError);
    expect(logins).toHaveLength(1);

    advance(299_999);
    expect(subject.held()).not.toBeNull();
    advance(1);
    expect(subject.held()).toBeNull();
    const again = login();
    await settle();
    expect(logins).toHaveLength(2);
    logins[1]!.accept();
    await again;
    expect(subject.held()).toBeNull();
  });

  it('are held again when a login accepted before is refused', async () => {
    const { subject, login, logins } = gate();
    const first = login();
    await settle();
    logins[0]!.accept();
    await first;
    const second = login();
    await settle();
    logins[1]!.refuse(refusal(535));
    await expect(second).rejects.toThrow('Invalid login');
    expect(subject.held()).not.toBeNull();
  });

  it('are not held after a refusal that says nothing of the password, nor after a lost connection', async () => {
    const { subject, login, logins } = gate();
    for (const error of [
      refusal(454),
      refusal(530),
      Object.assign(new Error('lost'), { code: 'ECONNECTION' }),
    ]) {
      const attempt = login();
      await settle();
      logins.at(-1)!.refuse(error);
      await expect(attempt).rejects.toBe(error);
      expect(subject.held()).toBeNull();
    }
    expect(logins).toHaveLength(3);
  });
});

describe('a refusal of the credentials', () => {
  it("is a 535 to Herald's AUTH, and nothing else", () => {
    expect(refusedCredentials(refusal(535))).toBe(true);
    expect(refusedCredentials({ responseCode: 535, command: 'MAIL FROM' })).toBe(false);
    expect(refusedCredentials({ responseCode: 454, code: 'EAUTH' })).toBe(false);
    expect(refusedCredentials(null)).toBe(false);
  });
});
