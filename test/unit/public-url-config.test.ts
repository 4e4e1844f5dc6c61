import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

/** HERALD_PUBLIC_URL: the dashboard's public address, checked at start-up. */
describe('HERALD_PUBLIC_URL', () => {
  it('is read as given, and is none when unset', () => {
    expect(loadConfig({ HERALD_PUBLIC_URL: 'https://herald.example.com' }).publicUrl).toBe(
      'https://herald.example.com',
    );
    expect(loadConfig({ HERALD_PUBLIC_URL: 'http://10.0.0.5:3000/' }).publicUrl).toBe(
      'http://10.0.0.5:3000/',
    );
    expect(loadConfig({}).publicUrl).toBeNull();
  });

  it.each(['herald.example.com', 'ftp://herald.example.com', 'https://user:pw@herald.example.com', '/dash'])(
    'is refused as %j, with what it must be',
    (value) => {
      const load = () => loadConfig({ HERALD_PUBLIC_URL: value });
      expect(load).toThrow(ConfigError);
      expect(load).toThrow(
        `HERALD_PUBLIC_URL must be the dashboard's http:// or https:// address, e.g. https://herald.example.com, got ${JSON.stringify(value)}`,
      );
    },
  );
});
