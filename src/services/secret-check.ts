import type { Kysely } from 'kysely';
import { StartupError } from '../config.js';
import { SEALED, SecretBox } from '../security/cipher.js';
import type { Database } from '../storage/schema.js';
import { anySealedSecret, readSetting, writeSettingOnce } from '../storage/settings.js';

const CHECK_KEY = 'secret_check';
const CHECK_TEXT = 'herald';

/** The purpose each kind of stored secret was sealed for: a check opens one the same way. */
const PURPOSES = { smtp: SEALED.smtpPassword, webhook: SEALED.webhookSecret } as const;

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
