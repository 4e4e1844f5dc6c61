import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { StartupError } from '../config.js';
import { makeDirectory } from '../storage/directory.js';

const SECRET_FILE = 'secret.key';

/** Where a generated secret key is kept: the data directory's `secret.key`. */
export function secretKeyFile(dataDir: string): string {
  return path.join(dataDir, SECRET_FILE);
}

/** The secret key this process has: HERALD_SECRET_KEY when given, else the data directory's file. */
export function readSecretKey(configured: string | null, dataDir: string): string | null {
  if (configured !== null) return configured;
  const file = secretKeyFile(dataDir);
  let key: string;
  try {
    key = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return null;
  }
  // The file appears whole (generateSecretKey): an empty one was emptied, and is no key.
  if (key === '')
    throw new StartupError(`${file} is empty: put back the key it held, or remove it on a new install`);
  return key;
}

/**
 * Generates the instance secret (outside production only): a random key written once into the
 * data directory with mode 0600 and reused on every later start. The key is written to a file of
 * its own and linked into place, so no process ever reads it half-written, and two processes
 * starting at once get the same key: the second link fails and its process reads the first.
 */
export function generateSecretKey(dataDir: string): string {
  const file = secretKeyFile(dataDir);
  makeDirectory(dataDir);
  const secret = randomBytes(32).toString('hex');
  const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(draft, secret + '\n', { mode: 0o600, flag: 'wx' });
  try {
    linkSync(draft, file);
    return secret;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return readFileSync(file, 'utf8').trim();
  } finally {
    rmSync(draft, { force: true });
  }
}
