import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** A value of the instance's own settings (`settings` table), or undefined. */
export async function readSetting(db: Kysely<Database>, key: string): Promise<string | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row?.value;
}

/** Writes a setting, whatever it held. */
export async function writeSetting(db: Kysely<Database>, key: string, value: string): Promise<void> {
  await db
    .insertInto('settings')
    .values({ key, value })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
    .execute();
}

/** Writes a setting unless it exists (the first writer wins); returns the value now stored. */
export async function writeSettingOnce(db: Kysely<Database>, key: string, value: string): Promise<string> {
  await db
    .insertInto('settings')
    .values({ key, value })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  return (await readSetting(db, key)) ?? value;
}

/** Any one stored secret: an SMTP password or a webhook endpoint's secret, sealed. */
export async function anySealedSecret(
  db: Kysely<Database>,
): Promise<{ readonly kind: 'smtp' | 'webhook'; readonly sealed: string } | undefined> {
  const smtp = await db
    .selectFrom('smtp_settings')
    .select('password_enc')
    .where('password_enc', 'is not', null)
    .limit(1)
    .executeTakeFirst();
  if (smtp?.password_enc) return { kind: 'smtp', sealed: smtp.password_enc };
  const hook = await db.selectFrom('webhook_endpoints').select('secret_enc').limit(1).executeTakeFirst();
  return hook === undefined ? undefined : { kind: 'webhook', sealed: hook.secret_enc };
}
