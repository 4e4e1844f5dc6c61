import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * 32 random bytes, base64url: 256 bits, far beyond guessing, so a plain SHA-256 suffices to store
 * one (sessions, setup links) and no slow hash is needed.
 */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Equal-time comparison of two secrets of any length (their digests have the same length). */
export function secretsMatch(sent: string, expected: string): boolean {
  const a = createHash('sha256').update(sent).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b) && sent.length > 0;
}
