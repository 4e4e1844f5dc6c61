import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Admin passwords, hashed with scrypt and stored as a self-describing string in the PHC format:
 * `$scrypt$ln=17,r=8,p=1$<salt>$<hash>` (unpadded base64). The parameters travel with each hash, so
 * they can be raised later without invalidating stored passwords.
 *
 * N = 2^17, r = 8 needs 128 · N · r = 128 MiB per hash (OWASP's scrypt recommendation); maxmem is
 * set to 256 MiB because Node's default (32 MiB) would refuse those parameters.
 */

const COST_LOG2 = 17;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
const MAX_MEMORY = 256 * 1024 * 1024;
const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

function derive(password: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, keyLength, options, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

function b64(buffer: Buffer): string {
  return buffer.toString('base64').replace(/=+$/, '');
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, KEY_BYTES, {
    N: 2 ** COST_LOG2,
    r: BLOCK_SIZE,
    p: PARALLELISM,
    maxmem: MAX_MEMORY,
  });
  return `$scrypt$ln=${COST_LOG2},r=${BLOCK_SIZE},p=${PARALLELISM}$${b64(salt)}$${b64(key)}`;
}

/**
 * Compares in constant time. A malformed stored hash, or parameters beyond what this build accepts
 * (they would let a tampered row exhaust memory), verify as false rather than throwing.
 */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = PHC.exec(stored);
  if (match === null) return false;
  const [, ln, r, p, salt, hash] = match as unknown as [string, string, string, string, string, string];
  const costLog2 = Number(ln);
  const blockSize = Number(r);
  const parallelism = Number(p);
  if (costLog2 < 10 || blockSize < 1 || parallelism < 1 || parallelism > 4) return false;
  if (128 * 2 ** costLog2 * blockSize > MAX_MEMORY / 2) return false;
  const expected = Buffer.from(hash, 'base64');
  if (expected.length < 16) return false;
  const actual = await derive(password, Buffer.from(salt, 'base64'), expected.length, {
    N: 2 ** costLog2,
    r: blockSize,
    p: parallelism,
    maxmem: MAX_MEMORY,
  });
  return timingSafeEqual(actual, expected);
}

/**
 * A valid hash of a random password, computed once. Logins for unknown emails verify against it so
 * that they take as long as logins for known ones, and the response time does not reveal which
 * emails are admins.
 */
let decoy: Promise<string> | null = null;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  return decoy;
}
