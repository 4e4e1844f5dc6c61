import type { Kysely } from 'kysely';
import { StartupError } from '../config.js';
import { SEALED, SecretBox } from '../security/cipher.js';
import { generateSecretKey, readSecretKey, secretKeyFile } from '../security/secret-key.js';
import type { Database } from '../storage/schema.js';
import { anySealedSecret, readSetting, writeSettingOnce } from '../storage/settings.js';

const CHECK_KEY = 'secret_check';
const CHECK_TEXT = 'herald';

/** The purpose each kind of stored secret was sealed for: a check opens one the same way. */
const PURPOSES = { smtp: SEALED.smtpPassword, webhook: SEALED.webhookSecret } as const;

/** Where this process's secret key comes from, for the database at hand. */
export interface SecretKeySource {
  /** HERALD_SECRET_KEY, or null when it is not set. */
  readonly configured: string | null;
  readonly dataDir: string;
}

/**
 * The secret key to run with, checked against the database (`checkSecretKey`). With neither
 * HERALD_SECRET_KEY nor a `secret.key` file, a key is generated only for a database that has none
 * yet: one that already holds a check value or a sealed secret was made with a key that is
 * elsewhere (the server's environment, a backup's key file), and a new one could never open it.
 * The file is then not written, so that no command run without the server's environment leaves
 * a wrong key behind for the next start or backup.
 */
export async function resolveSecretKey(db: Kysely<Database>, source: SecretKeySource): Promise<string> {
  let secret = readSecretKey(source.configured, source.dataDir);
  if (secret === null) {
    if (await holdsSealedValues(db))
      throw new StartupError(
        `No secret key: this database's SMTP passwords and webhook secrets were stored with a key ` +
          `that is neither in HERALD_SECRET_KEY nor in ${secretKeyFile(source.dataDir)}. Run with the ` +
          "server's environment (its HERALD_SECRET_KEY), or put back the secret.key the database " +
          'was made with (docs/operations.md, Restore)',
      );
    secret = generateSecretKey(source.dataDir);
  }
  await checkSecretKey(db, secret, { configured: source.configured !== null, dataDir: source.dataDir });
  return secret;
}

/** Whether anything in the database was sealed with a secret key: the check value or a secret. */
async function holdsSealedValues(db: Kysely<Database>): Promise<boolean> {
  return (await readSetting(db, CHECK_KEY)) !== undefined || (await anySealedSecret(db)) !== undefined;
}

/**
 * How the secret key this process has stands with the database, without changing either: `opens`
 * (or nothing sealed yet to open), `wrong`, or `missing` (no key here, and sealed values).
 */
export async function secretKeyStanding(
  db: Kysely<Database>,
  source: SecretKeySource,
): Promise<'opens' | 'wrong' | 'missing'> {
  const secret = readSecretKey(source.configured, source.dataDir);
  const stored = await readSetting(db, CHECK_KEY);
  const sealed = stored === undefined ? await anySealedSecret(db) : undefined;
  if (stored === undefined && sealed === undefined) return 'opens';
  if (secret === null) return 'missing';
  const [value, purpose] =
    stored !== undefined ? [stored, SEALED.secretCheck] : [sealed!.sealed, PURPOSES[sealed!.kind]];
  try {
    new SecretBox(secret, purpose).open(value);
    return 'opens';
  } catch {
    return 'wrong';
  }
}

/**
 * Refuses a secret key that cannot read what this database stores (product.md §14): a backup
 * restored without its secret key, or a HERALD_SECRET_KEY mistyped, would otherwise start and fail
 * later, one webhook or SMTP login at a time. A value sealed with the first key is kept in the
 * database and opened at every start; a database made before the check existed is checked
 * against one of its stored secrets instead, then given the check value.
 */
export async function checkSecretKey(
  db: Kysely<Database>,
  secret: string,
  source: { readonly configured: boolean; readonly dataDir: string },
): Promise<void> {
  const stored = await readSetting(db, CHECK_KEY);
  const opens = (sealed: string, purpose: string) => {
    try {
      new SecretBox(secret, purpose).open(sealed);
      return true;
    } catch {
      return false;
    }
  };
  if (stored === undefined) {
    const existing = await anySealedSecret(db);
    if (existing === undefined || opens(existing.sealed, PURPOSES[existing.kind])) {
      const written = await writeSettingOnce(
        db,
        CHECK_KEY,
        new SecretBox(secret, SEALED.secretCheck).seal(CHECK_TEXT),
      );
      if (opens(written, SEALED.secretCheck)) return;
    }
  } else if (opens(stored, SEALED.secretCheck)) {
    return;
  }
  const which = source.configured ? 'HERALD_SECRET_KEY' : `the generated key in ${source.dataDir}/secret.key`;
  throw new StartupError(
    `${which} is not the secret key this database's SMTP passwords and webhook secrets were stored ` +
      'with; start with the key it was made with (a restored backup needs its own secret key: see ' +
      'docs/operations.md, Restore)',
  );
}
