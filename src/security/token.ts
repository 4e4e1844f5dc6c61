import { randomBytes } from 'node:crypto';

/**
 * 32 random bytes, base64url: 256 bits, far beyond guessing, so a plain SHA-256 suffices to store
 * one (sessions, setup links) and no slow hash is needed.
 */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}
