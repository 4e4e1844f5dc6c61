import type { Insertable, Kysely } from 'kysely';
import type { Database, SmtpSettingsRow, SmtpSettingsTable } from './schema.js';
import { deleteRows, findRow } from './rows.js';

export async function upsertSmtpSettings(
  db: Kysely<Database>,
  row: Insertable<SmtpSettingsTable>,
): Promise<SmtpSettingsRow> {
  const { project_id: _, ...changes } = row;
  return db
    .insertInto('smtp_settings')
    .values(row)
    .onConflict((oc) => oc.column('project_id').doUpdateSet(changes))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findSmtpSettings(
  db: Kysely<Database>,
  projectId: number,
): Promise<SmtpSettingsRow | undefined> {
  return findRow(db, 'smtp_settings', { project_id: projectId });
}

export async function deleteSmtpSettings(db: Kysely<Database>, projectId: number): Promise<boolean> {
  return deleteRows(db, 'smtp_settings', { project_id: projectId });
}

/** How many projects have SMTP settings of their own (said at start-up, next to the default transport). */
export async function countProjectSmtpSettings(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('smtp_settings')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}
