import type {
  Expression,
  ExpressionBuilder,
  Insertable,
  Kysely,
  Selectable,
  SqlBool,
  Updateable,
} from 'kysely';
import { insertRows } from './bulk-insert.js';
import type { Database } from './schema.js';

type Table = keyof Database;

/** A row of `T` as it is read. */
export type Row<T extends Table> = Selectable<Database[T]>;

/**
 * The statements most tables share: one row by its key, the rows of a key in order, an update by
 * key that returns the row, a deletion by key that says whether a row was there, inserts in
 * statements of bounded size, a page of a log newest first. A key names
 * columns with their values (`Pick`, so none can be left undefined and match every row); it is
 * compared with `=`, or `IS` for null.
 */
type Key<T extends Table, K extends keyof Row<T>> = Pick<Row<T>, K>;

/** The tables with untyped columns, so one statement serves each; results take the caller's table's type. */
type AnyDatabase = Record<string, Record<string, unknown>>;

function any(db: Kysely<Database>): Kysely<AnyDatabase> {
  return db as unknown as Kysely<AnyDatabase>;
}

/** A condition on a row's columns. */
type Condition = (eb: ExpressionBuilder<AnyDatabase, string>) => Expression<SqlBool>;

/** The condition that the row's columns have the values `key` or `filter` gives them. */
function matching(key: object): Condition {
  return (eb) => eb.and(key as AnyDatabase[string]);
}

/** The rows that meet `where`, ordered by the columns given (ascending). */
async function selectRows<T extends Table>(
  db: Kysely<Database>,
  table: T,
  where: Condition,
  order: readonly string[],
): Promise<Row<T>[]> {
  let query = any(db)
    .selectFrom(table as string)
    .selectAll()
    .where(where);
  for (const column of order) query = query.orderBy(column);
  return (await query.execute()) as Row<T>[];
}

/** The row with this key, if any. */
export async function findRow<T extends Table, K extends keyof Row<T>>(
  db: Kysely<Database>,
  table: T,
  key: Key<T, K>,
): Promise<Row<T> | undefined> {
  const row = await any(db)
    .selectFrom(table as string)
    .selectAll()
    .where(matching(key))
    .executeTakeFirst();
  return row as Row<T> | undefined;
}

/**
 * The rows whose `column` holds one of `values`, ordered by the columns given (ascending); none
 * for no values, without a query (`IN ()` is not SQL).
 */
export async function rowsIn<T extends Table>(
  db: Kysely<Database>,
  table: T,
  column: keyof Row<T> & string,
  values: readonly unknown[],
  ...order: (keyof Row<T> & string)[]
): Promise<Row<T>[]> {
  if (values.length === 0) return [];
  return selectRows(db, table, (eb) => eb(column as string, 'in', values), order);
}

/** The rows with this key, ordered by the columns given (ascending). */
export async function listRows<T extends Table, K extends keyof Row<T>>(
  db: Kysely<Database>,
  table: T,
  key: Key<T, K>,
  ...order: (keyof Row<T> & string)[]
): Promise<Row<T>[]> {
  return selectRows(db, table, matching(key), order);
}

/** Writes `changes` to the row with this key and returns it as it is now; undefined when there is none. */
export async function updateRow<T extends Table, K extends keyof Row<T>>(
  db: Kysely<Database>,
  table: T,
  key: Key<T, K>,
  changes: Updateable<Database[T]>,
): Promise<Row<T> | undefined> {
  const row = await any(db)
    .updateTable(table as string)
    .set(changes as AnyDatabase[string])
    .where(matching(key))
    .returningAll()
    .executeTakeFirst();
  return row as Row<T> | undefined;
}

/** Deletes the rows with this key; false when there were none. */
export async function deleteRows<T extends Table, K extends keyof Row<T>>(
  db: Kysely<Database>,
  table: T,
  key: Key<T, K>,
): Promise<boolean> {
  const result = await any(db)
    .deleteFrom(table as string)
    .where(matching(key))
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * A page of rows, newest (highest id) first: the filter's columns left undefined match every row,
 * and `beforeId` is the last id of the page before.
 */
export async function newestPage<T extends Table>(
  db: Kysely<Database>,
  table: T,
  filter: Partial<Row<T>>,
  page: { readonly beforeId?: number; readonly limit: number },
): Promise<Row<T>[]> {
  const rows = await any(db)
    .selectFrom(table as string)
    .selectAll()
    .where(matching(filter))
    .$if(page.beforeId !== undefined, (qb) => qb.where('id', '<', page.beforeId))
    .orderBy('id', 'desc')
    .limit(page.limit)
    .execute();
  return rows as Row<T>[];
}

/**
 * Inserts rows in statements of at most `perStatement` rows, in order: a single statement for a
 * large batch could pass the backends' limits on bound parameters (SQLite 32,766, PostgreSQL
 * 65,535). The default, 500 rows, stays under both for rows of up to 65 columns.
 */
export async function insertInChunks<T extends Table>(
  db: Kysely<Database>,
  table: T,
  rows: readonly Insertable<Database[T]>[],
  perStatement = 500,
): Promise<void> {
  for (let start = 0; start < rows.length; start += perStatement)
    await insertRows(db, table, rows.length <= perStatement ? rows : rows.slice(start, start + perStatement));
}

/** The tables whose rows a project names: templates and layouts. */
type NamedTable = { [T in Table]: Row<T> extends { project_id: number; name: string } ? T : never }[Table];

/**
 * The statements of a table whose rows a project names, each by project and name (names are
 * case-sensitive on both backends: `=` on TEXT compares bytes): insert, find (or by id), list by
 * name, update, delete.
 */
export function namedRows<T extends NamedTable>(table: T) {
  const named = (projectId: number, name: string) =>
    ({ project_id: projectId, name }) as Key<T, keyof Row<T>>;
  return {
    insert: async (db: Kysely<Database>, row: Insertable<Database[T]>): Promise<Row<T>> =>
      (await any(db)
        .insertInto(table as string)
        .values(row as AnyDatabase[string])
        .returningAll()
        .executeTakeFirstOrThrow()) as Row<T>,
    find: (db: Kysely<Database>, projectId: number, name: string) =>
      findRow(db, table, named(projectId, name)),
    findById: (db: Kysely<Database>, id: number) => findRow(db, table, { id } as Key<T, keyof Row<T>>),
    list: (db: Kysely<Database>, projectId: number) =>
      listRows(db, table, { project_id: projectId } as Key<T, keyof Row<T>>, 'name' as keyof Row<T> & string),
    update: (db: Kysely<Database>, projectId: number, name: string, changes: Updateable<Database[T]>) =>
      updateRow(db, table, named(projectId, name), changes),
    delete: (db: Kysely<Database>, projectId: number, name: string) =>
      deleteRows(db, table, named(projectId, name)),
  };
}
