import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import { deleteRows, namedRows } from './rows.js';

/** A project's layouts, each by its name. */
export const layoutRows = namedRows('template_layouts');

/**
 * The templates whose current version uses the layout, by name: at most `limit` names, and how
 * many there are in all.
 */
export async function layoutUsers(
  db: Kysely<Database>,
  layoutId: number,
  limit: number,
): Promise<{ names: string[]; count: number }> {
  const users = db
    .selectFrom('templates as t')
    .innerJoin('template_versions as v', (join) =>
      join.onRef('v.template_id', '=', 't.id').onRef('v.version', '=', 't.version'),
    )
    .where('v.layout_id', '=', layoutId);
  const [named, counted] = await Promise.all([
    users.select('t.name').orderBy('t.name').limit(limit).execute(),
    users.select((eb) => eb.fn.countAll<number | string | bigint>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { names: named.map((row) => row.name), count: Number(counted.n) };
}

export async function deleteLayout(db: Kysely<Database>, layoutId: number): Promise<void> {
  await deleteRows(db, 'template_layouts', { id: layoutId });
}
