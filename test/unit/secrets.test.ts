import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig, ConfigError } from '../../src/config.js';
import {
  apiKeyPrefix,
  bearerToken,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
} from '../../src/domain/api-key.js';
import { createLogger } from '../../src/logger.js';
import { SecretBox } from '../../src/security/cipher.js';
import { generateSecretKey, readSecretKey } from '../../src/security/secret-key.js';

describe('API keys', () => {
  it('are hrl_ + 38 base62 characters with a valid checksum', () => {
    const { key, hash, prefix } = generateApiKey();
    expect(key).toMatch(/^hrl_[0-9A-Za-z]{38}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
    expect(hash).toBe(hashApiKey(key));
    expect(hash).not.toContain(key.slice(4));
    expect(prefix).toBe(apiKeyPrefix(key));
    expect(prefix).toHaveLength(12);
  });

  it('refuse a key whose checksum does not match', () => {
    const { key } = generateApiKey();
    const last = key.at(-1) === 'a' ? 'b' : 'a';
    expect(isWellFormedApiKey(key.slice(0, -1) + last)).toBe(false);
    const body = key.slice(4, 10);
    const swapped = `hrl_${body.split('').reverse().join('')}${key.slice(10)}`;
    if (swapped !== key) expect(isWellFormedApiKey(swapped)).toBe(false);
    expect(isWellFormedApiKey('hrl_short')).toBe(false);
    expect(isWellFormedApiKey(`xyz_${key.slice(4)}`)).toBe(false);
  });

  it('are read from a Bearer header only, with any case of the scheme', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('BEARER  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeNull();
    expect(bearerToken('Bearer')).toBeNull();
    expect(bearerToken('Bearer a b')).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
  });
});

describe('secrets at rest', () => {
  it('encrypts with AES-256-GCM under the instance secret, and detects tampering', () => {
    const box = new SecretBox('x'.repeat(64));
    const sealed = box.seal('hunter2');
    expect(sealed).toMatch(/^v1:/);
    expect(sealed).not.toContain('hunter2');
    expect(box.seal('hunter2')).not.toBe(sealed);
    expect(box.open(sealed)).toBe('hunter2');
    expect(() => new SecretBox('y'.repeat(64)).open(sealed)).toThrow(/HERALD_SECRET_KEY/);
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw.writeUInt8(raw.readUInt8(raw.length - 1) ^ 1, raw.length - 1);
    expect(() => box.open('v1:' + raw.toString('base64'))).toThrow();
  });

  it('generates the secret once into the data dir with mode 0600', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'herald-secret-'));
    try {
      expect(readSecretKey(null, dir)).toBeNull();
      const first = generateSecretKey(dir);
      expect(first).toMatch(/^[0-9a-f]{64}$/);
      expect(statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
      expect(readSecretKey(null, dir)).toBe(first);
      // A process generating one after another did keeps the first key, and leaves no draft behind.
      expect(generateSecretKey(dir)).toBe(first);
      expect(readFileSync(path.join(dir, 'secret.key'), 'utf8').trim()).toBe(first);
      expect(readdirSync(dir)).toEqual(['secret.key']);
      // An emptied file is no key: refused, not taken as the empty key.
      writeFileSync(path.join(dir, 'secret.key'), '\n');
      expect(() => readSecretKey(null, dir)).toThrow('secret.key is empty');
      expect(readSecretKey('given-secret-of-at-least-32-characters', dir)).toBe(
        'given-secret-of-at-least-32-characters',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('requires HERALD_SECRET_KEY in production', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(loadConfig({ NODE_ENV: 'production', HERALD_SECRET_KEY: 'k'.repeat(64) }).host).toBe('0.0.0.0');
    expect(loadConfig({}).host).toBe('127.0.0.1');
  });

  it('never writes keys, passwords or SMTP URLs to the log', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger('info', sink);
    const { key } = generateApiKey();
    logger.info(
      { apiKey: key, api_key: key, password: 'hunter2', smtpUrl: 'smtp://u:hunter2@h' },
      'top level',
    );
    logger.info(
      { project: { api_key: key }, smtp: { password: 'hunter2', auth: { pass: 'hunter2' } } },
      'nested',
    );
    logger.info({ req: { headers: { authorization: `Bearer ${key}` } } }, 'request');
    const output = lines.join('');
    expect(lines).toHaveLength(3);
    expect(output).not.toContain(key);
    expect(output).not.toContain('hunter2');
    expect(output).toContain('[redacted]');
  });
});
