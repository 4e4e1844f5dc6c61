import type { Kysely } from 'kysely';
import { StartupError } from '../config.js';
import { SEALED, SecretBox } from '../security/cipher.js';
import { generateSecretKey, readSecretKey, secretKeyFile } from '../security/secret-key.js';
import type { Database } from '../storage/schema.js';
import { anySealedSecret, readSetting, writeSettingOnce } from '../storage/settings.js';

/** The setting that holds the check value: written by every first start, it is no one's data. */
export const CHECK_KEY = 'secret_check';
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
 * What in the database shows which key it was made with: the check value written at its first
 * start, or for a database from before the check, one of its sealed secrets. None for a database
 * that has never started.
 */
interface Proof {
  readonly sealed: string;
  readonly purpose: string;
  readonly isCheck: boolean;
}

async function proofOf(db: Kysely<Database>): Promise<Proof | null> {
  const check = await readSetting(db, CHECK_KEY);
  if (check !== undefined) return { sealed: check, purpose: SEALED.secretCheck, isCheck: true };
  const secret = await anySealedSecret(db);
  return secret === undefined
    ? null
    : { sealed: secret.sealed, purpose: PURPOSES[secret.kind], isCheck: false };
}

function opens(secret: string, proof: Proof): boolean {
  try {
    new SecretBox(secret, proof.purpose).open(proof.sealed);
    return true;
  } catch {
    return false;
  }
}

/** How the secret key is named to the operator. */
function keyName(source: SecretKeySource): string {
  return source.configured !== null ? 'HERALD_SECRET_KEY' : `the key in ${secretKeyFile(source.dataDir)}`;
}

/**
 * The secret key to run with, checked against the database (product.md §14): a backup restored
 * without its key, or a HERALD_SECRET_KEY mistyped, would otherwise start and fail later, one
 * webhook or SMTP login at a time. With neither HERALD_SECRET_KEY nor a `secret.key` file, a key
 * is generated only for a database that has never started; one that has was made with a key that
 * is elsewhere (the server's environment, a backup's key file), and a new one could never open
 * it. Nothing is then written, so that no command run without the server's environment leaves a
 * wrong key behind for the next start or backup.
 */
export async function resolveSecretKey(db: Kysely<Database>, source: SecretKeySource): Promise<string> {
  let secret = readSecretKey(source.configured, source.dataDir);
  let proof = await proofOf(db);
  if (secret === null && proof === null) secret = generateSecretKey(source.dataDir);
  // Another process may have generated it meanwhile (and then written its check value).
  secret ??= readSecretKey(source.configured, source.dataDir);
  if (secret === null)
    throw new StartupError(
      `No secret key: this database was set up with a secret key that is neither in ` +
        `HERALD_SECRET_KEY nor in ${secretKeyFile(source.dataDir)}, and its SMTP passwords and webhook ` +
        "secrets open only with that key. Run with the server's environment (its HERALD_SECRET_KEY), or " +
        'put back the secret.key the database was made with (docs/operations.md, Restore)',
    );
  // The first start, or a database from before the check: the check value is written once, by
  // whichever process gets there first, and every process then checks against that one.
  if (proof === null || !proof.isCheck) {
    if (proof === null || opens(secret, proof))
      await writeSettingOnce(db, CHECK_KEY, new SecretBox(secret, SEALED.secretCheck).seal(CHECK_TEXT));
    proof = await proofOf(db);
  }
  if (proof !== null && opens(secret, proof)) return secret;
  throw new StartupError(
    `${keyName(source)} is not the secret key this database's SMTP passwords and webhook secrets ` +
      'were stored with; start with the key it was made with (a restored backup needs its own secret ' +
      'key: see docs/operations.md, Restore)',
  );
}

/**
 * How the secret key this process has stands with the database, changing neither: it `opens` what
 * is sealed there (or nothing is yet), it is `wrong`, or it is `missing` where something is sealed.
 */
export async function secretKeyStanding(
  db: Kysely<Database>,
  source: SecretKeySource,
): Promise<'opens' | 'wrong' | 'missing'> {
  const proof = await proofOf(db);
  if (proof === null) return 'opens';
  const secret = readSecretKey(source.configured, source.dataDir);
  if (secret === null) return 'missing';
  return opens(secret, proof) ? 'opens' : 'wrong';
}
