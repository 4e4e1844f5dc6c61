import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

/** HERALD_PUBLIC_URL: the dashboard's public address, checked at start-up. */
describe('HERALD_PUBLIC_URL', () => {
  it('is kept as its origin and path, without a trailing slash, and is none when unset', () => {
    for (const [given, kept] of [
      ['https://herald.example.com', 'https://herald.example.com'],
      ['http://10.0.0.5:3000/', 'http://10.0.0.5:3000'],
      [' HTTPS://Herald.Example.com:443/ ', 'https://herald.example.com'],
      ['https://example.com/herald/', 'https://example.com/herald'],
    ])
      expect(loadConfig({ HERALD_PUBLIC_URL: given }).publicUrl, given).toBe(kept);
    expect(loadConfig({}).publicUrl).toBeNull();
  });

  it.each([
    'herald.example.com',
    'ftp://herald.example.com',
    'https://user:pw@herald.example.com',
    'https://:pw@herald.example.com',
    'https://herald.example.com/?next=/x',
    'https://herald.example.com/#top',
    '/dash',
  ])('is refused as %j, with what it must be', (value) => {
    const load = () => loadConfig({ HERALD_PUBLIC_URL: value });
    expect(load).toThrow(ConfigError);
    expect(load).toThrow(
      `HERALD_PUBLIC_URL must be the dashboard's http:// or https:// address, e.g. https://herald.example.com, got ${JSON.stringify(value)}`,
    );
  });
});
