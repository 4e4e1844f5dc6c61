import type { Insertable, Kysely, Updateable } from 'kysely';
import type { Database, TemplateRow, TemplatesTable } from './schema.js';
import { deleteRows, findRow, listRows, updateRow } from './rows.js';

export async function insertTemplate(
  db: Kysely<Database>,
  row: Insertable<TemplatesTable>,
): Promise<TemplateRow> {
  return db.insertInto('templates').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateTemplate(
  db: Kysely<Database>,
  projectId: number,
  name: string,
  changes: Updateable<TemplatesTable>,
): Promise<TemplateRow | undefined> {
  return updateRow(db, 'templates', { project_id: projectId, name }, changes);
}

/** A project's template by its name, which is case-sensitive on both backends: `=` on TEXT compares bytes. */
export async function findTemplate(
  db: Kysely<Database>,
  projectId: number,
  name: string,
): Promise<TemplateRow | undefined> {
  return findRow(db, 'templates', { project_id: projectId, name });
}

export async function listTemplates(db: Kysely<Database>, projectId: number): Promise<TemplateRow[]> {
  return listRows(db, 'templates', { project_id: projectId }, 'name');
}

export async function deleteTemplate(
  db: Kysely<Database>,
  projectId: number,
  name: string,
): Promise<boolean> {
  return deleteRows(db, 'templates', { project_id: projectId, name });
}
