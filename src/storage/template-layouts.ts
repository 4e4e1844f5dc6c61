import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import { deleteRows, namedRows } from './rows.js';

/** A project's layouts, each by its name. */
export const layoutRows = namedRows('template_layouts');

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
