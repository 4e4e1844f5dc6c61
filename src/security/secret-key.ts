import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const SECRET_FILE = 'secret.key';

/** Where a generated secret key is kept: the data directory's `secret.key`. */
export function secretKeyFile(dataDir: string): string {
  return path.join(dataDir, SECRET_FILE);
}

/** The secret key this process has: HERALD_SECRET_KEY when given, else the data directory's file. */
export function readSecretKey(configured: string | null, dataDir: string): string | null {
  if (configured !== null) return configured;
  try {
    return readFileSync(secretKeyFile(dataDir), 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return null;
  }
}

/**
 * Generates the instance secret (outside production only): a random key written once into the
 * data directory with mode 0600 and reused on every later start. Two processes starting at once
 * get the same key.
 */
export function generateSecretKey(dataDir: string): string {
  const file = secretKeyFile(dataDir);
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('hex');
  try {
    // 'wx' fails if another process created the file first; then its key is the one to use.
    writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
    return secret;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return readFileSync(file, 'utf8').trim();
  }
}
