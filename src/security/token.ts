import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * 32 random bytes, base64url: 256 bits, far beyond guessing, so a plain SHA-256 suffices to store
 * one (sessions, setup links) and no slow hash is needed.
 */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Equal-time comparison of two secrets of any length (their digests have the same length). */
export function secretsMatch(sent: string, expected: string): boolean {
  const a = hash('sha256', sent, 'buffer');
  const b = hash('sha256', expected, 'buffer');
  return timingSafeEqual(a, b) && sent.length > 0;
}
