import type { Insertable, Kysely, Updateable } from 'kysely';
import type { Database, TemplateLayoutRow, TemplateLayoutsTable } from './schema.js';
import { deleteRows, findRow, listRows, updateRow } from './rows.js';

export async function insertLayout(
  db: Kysely<Database>,
  row: Insertable<TemplateLayoutsTable>,
): Promise<TemplateLayoutRow> {
  return db.insertInto('template_layouts').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateLayout(
  db: Kysely<Database>,
  projectId: number,
  name: string,
  changes: Updateable<TemplateLayoutsTable>,
): Promise<TemplateLayoutRow | undefined> {
  return updateRow(db, 'template_layouts', { project_id: projectId, name }, changes);
}

export async function findLayout(
  db: Kysely<Database>,
  projectId: number,
  name: string,
): Promise<TemplateLayoutRow | undefined> {
  return findRow(db, 'template_layouts', { project_id: projectId, name });
}

export async function findLayoutById(
  db: Kysely<Database>,
  id: number,
): Promise<TemplateLayoutRow | undefined> {
  return findRow(db, 'template_layouts', { id });
}

export async function listLayouts(db: Kysely<Database>, projectId: number): Promise<TemplateLayoutRow[]> {
  return listRows(db, 'template_layouts', { project_id: projectId }, 'name');
}

/** How many templates are at a version that uses the layout. */
export async function countLayoutUsers(db: Kysely<Database>, layoutId: number): Promise<number> {
  const row = await db
    .selectFrom('templates as t')
    .innerJoin('template_versions as v', (join) =>
      join.onRef('v.template_id', '=', 't.id').onRef('v.version', '=', 't.version'),
    )
    .select((eb) => eb.fn.countAll<number | string | bigint>().as('n'))
    .where('v.layout_id', '=', layoutId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteLayout(db: Kysely<Database>, layoutId: number): Promise<void> {
  await deleteRows(db, 'template_layouts', { id: layoutId });
}
