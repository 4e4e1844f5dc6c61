import { errors } from './errors.js';
import { hashApiKey, isWellFormedApiKey, keyFormat, type GeneratedKey } from './api-key.js';

/**
 * Admin tokens (product.md §13) open the management API under /api/v1/admin. They are made like
 * API keys, `hrla_` + 32 random base62 characters + a CRC32 checksum, so a token with a bad
 * checksum is refused without a database lookup, and only a SHA-256 hash of each is stored. An
 * API key is never a well-formed admin token and an admin token never a well-formed API key: each
 * kind is refused on the other's routes before anything is looked up.
 */

const ADMIN_TOKEN = keyFormat('hrla_');

export function generateAdminToken(): GeneratedKey {
  return ADMIN_TOKEN.generate();
}

export function isWellFormedAdminToken(token: string): boolean {
  return ADMIN_TOKEN.isWellFormed(token);
}

/** What a request that was refused with a 401 carried, besides a Bearer token. */
export interface GivenCredentials {
  /** The Authorization header as sent. */
  readonly authorization: string | undefined;
  /** Where else a credential was put: `an X-API-Key header`, `the query string`; null for nowhere. */
  readonly elsewhere: string | null;
}

/**
 * The hint of a 401, where it can say what to change: a key sent without the Bearer scheme, or
 * outside the Authorization header, or a token well formed for the other API (an admin token sent
 * to the notification API, a project's API key sent to the management API). Anything else gets
 * none: a wrong or revoked key is not told apart from a missing one.
 */
export function wrongApiHint(
  given: GivenCredentials,
  token: string | null,
  api: 'notifications' | 'admin',
): string | undefined {
  const form =
    api === 'notifications'
      ? "a project's API key as Authorization: Bearer hrl_…"
      : 'an admin token as Authorization: Bearer hrla_…';
  if (token === null) {
    const header = (given.authorization ?? '').trim();
    // `Bearer` with something other than one token after it is a wrong token, not a wrong place.
    if (header !== '' && !/^bearer\b/i.test(header))
      return `Send ${form}: the Authorization header takes the Bearer scheme`;
    if (given.elsewhere !== null) return `Send ${form}, not in ${given.elsewhere}`;
    return undefined;
  }
  if (api === 'notifications' && isWellFormedAdminToken(token))
    return "This is an admin token (hrla_…), for /api/v1/admin; sends take a project's API key (hrl_…)";
  if (api === 'admin' && isWellFormedApiKey(token))
    return "This is a project's API key (hrl_…); the management API takes an admin token (hrla_…, herald token create)";
  return undefined;
}

export function hashAdminToken(token: string): string {
  return hashApiKey(token);
}

/** The part of a token kept in clear: `hrla_` and 8 characters, for lists and logs. */
export function adminTokenPrefix(token: string): string {
  return ADMIN_TOKEN.shownPart(token);
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9 _.:@/-]{0,99}$/;

/** What a token is for (`ci`, `terraform prod`): shown in lists and in the audit log. */
export function checkTokenName(name: string): string {
  const trimmed = name.trim();
  if (!NAME_PATTERN.test(trimmed))
    throw errors.invalidInput(
      'Token name must be 1–100 ASCII letters (A–Z, a–z), digits, spaces or . _ : @ / - characters, starting with a letter or digit',
    );
  return trimmed;
}
