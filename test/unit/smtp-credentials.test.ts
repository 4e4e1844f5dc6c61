import { describe, expect, it } from 'vitest';
import { storedPasswordSurvives } from '../../src/domain/smtp-credentials.js';

describe('stored SMTP password survives a settings change', () => {
  const stored = { host: 'relay.example', port: 587, username: 'mailer' };
  it.each([
    [{ ...stored }, true],
    [{ ...stored, host: 'RELAY.EXAMPLE' }, true],
    [{ ...stored, host: 'other.example' }, false],
    [{ ...stored, port: 25 }, false],
    [{ ...stored, username: 'other' }, false],
    [{ ...stored, username: null }, false],
  ])('%j: %s', (next, expected) => {
    expect(storedPasswordSurvives(stored, next)).toBe(expected);
  });
});
