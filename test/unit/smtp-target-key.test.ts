import { describe, expect, it } from 'vitest';
import { smtpTargetKey, type SmtpTarget } from '../../src/mail/smtp-target.js';

const target: SmtpTarget = {
  host: 'smtp.example.org',
  port: 587,
  security: 'starttls',
  username: 'mailer',
  password: 'secret-1',
};

describe('smtpTargetKey', () => {
  it('gives equal targets one pool, whether or not they are the same object', () => {
    expect(smtpTargetKey(target)).toBe(smtpTargetKey(target));
    expect(smtpTargetKey({ ...target })).toBe(smtpTargetKey(target));
  });

  it('gives a target with another login, port or security a pool of its own', () => {
    const key = smtpTargetKey(target);
    for (const other of [
      { ...target, password: 'secret-2' },
      { ...target, username: 'other' },
      { ...target, port: 2525 },
      { ...target, security: 'tls' as const },
      { ...target, trusted: true },
    ])
      expect(smtpTargetKey(other)).not.toBe(key);
  });

  it('does not hold the password in the key', () => {
    expect(smtpTargetKey(target)).not.toContain('secret-1');
  });
});
