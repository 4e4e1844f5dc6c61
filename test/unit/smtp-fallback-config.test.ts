import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

/** HERALD_SMTP_FALLBACK_URL (product.md §10): the fallback of HERALD_SMTP_URL, checked at start-up. */
describe('HERALD_SMTP_FALLBACK_URL', () => {
  it('is read with HERALD_SMTP_URL', () => {
    const config = loadConfig({
      HERALD_SMTP_URL: 'smtp://relay.example:587',
      HERALD_SMTP_FALLBACK_URL: 'smtps://user:pass@backup.example',
    });
    expect(config.smtpFallbackUrl).toBe('smtps://user:pass@backup.example');
    expect(loadConfig({}).smtpFallbackUrl).toBeNull();
  });

  it.each<[string, Record<string, string>, RegExp]>([
    [
      'not an SMTP URL',
      { HERALD_SMTP_URL: 'smtp://relay.example', HERALD_SMTP_FALLBACK_URL: 'https://backup.example' },
      /^HERALD_SMTP_FALLBACK_URL must start with smtp:\/\/ or smtps:\/\/$/,
    ],
    [
      'without HERALD_SMTP_URL',
      { HERALD_SMTP_FALLBACK_URL: 'smtp://backup.example' },
      /^HERALD_SMTP_FALLBACK_URL needs HERALD_SMTP_URL/,
    ],
  ])('is refused %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
