import { hash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API keys look like `hrl_` + 32 random base62 characters + a 6-character base62 CRC32 checksum.
 * 32 base62 characters carry ~190 bits of entropy, so a plain SHA-256 is a sufficient one-way hash
 * (no salt or slow KDF is needed for keys that cannot be guessed). The checksum lets the API
 * refuse mistyped or forged keys without a database lookup. Admin tokens (`hrla_`, admin-token.ts)
 * are made the same way under their own prefix, so neither kind is ever well formed as the other.
 */

const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** How much of a key is kept in clear, besides its prefix, to tell keys apart in logs and lists. */
const SHOWN_LENGTH = 8;

function base62(value: number, width: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

function checksum(body: string): string {
  // 62^6 > 2^32, so six characters hold every CRC32 value.
  return base62(crc32(body), CHECKSUM_LENGTH);
}

export interface GeneratedKey {
  readonly key: string;
  readonly hash: string;
  readonly prefix: string;
}

/** One kind of bearer secret: its prefix, how one is made, recognised and shown. */
export interface KeyFormat {
  generate(): GeneratedKey;
  /** True when the key has this kind's shape and checksum; says nothing about whether it exists. */
  isWellFormed(key: string): boolean;
  /** The part kept in clear (the kind's prefix and 8 characters). */
  shownPart(key: string): string;
}

export function keyFormat(prefix: string): KeyFormat {
  const pattern = new RegExp(`^${prefix}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);
  const shownPart = (key: string) => key.slice(0, prefix.length + SHOWN_LENGTH);
  return {
    generate() {
      let random = '';
      for (let i = 0; i < RANDOM_LENGTH; i++) random += ALPHABET[randomInt(62)];
      const body = prefix + random;
      const key = body + checksum(body);
      return { key, hash: hashApiKey(key), prefix: shownPart(key) };
    },
    isWellFormed(key) {
      if (!pattern.test(key)) return false;
      return checksum(key.slice(0, -CHECKSUM_LENGTH)) === key.slice(-CHECKSUM_LENGTH);
    },
    shownPart,
  };
}

const API_KEY = keyFormat('hrl_');
/** How much of a key is kept in clear to tell keys apart in logs and the dashboard. */
export const KEY_PREFIX_LENGTH = 'hrl_'.length + SHOWN_LENGTH;

export function generateApiKey(): GeneratedKey {
  return API_KEY.generate();
}

/** True when the key has the right shape and checksum; says nothing about whether it exists. */
export function isWellFormedApiKey(key: string): boolean {
  return API_KEY.isWellFormed(key);
}

export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function apiKeyPrefix(key: string): string {
  return API_KEY.shownPart(key);
}

/**
 * Extracts the token of an `Authorization: Bearer <token>` header. The scheme is case-insensitive
 * (RFC 9110 §11.1); the key is never read from anywhere else.
 */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^bearer[ ]+([^\s]+)[ ]*$/i.exec(header);
  return match ? match[1]! : null;
}
