import { CompiledQuery, SqliteAdapter, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Multi-row INSERTs with their SQL kept. Kysely parses every value of every row and compiles the
 * statement anew on each build: for an accepted batch of 500 sends (16 columns, 8,000 values)
 * that took a sixth of the accept, more than SQLite took to insert the rows. Rows that all name
 * the same columns go in a statement compiled once per dialect, table, columns and row count and
 * kept (a bounded number of them, the way SQLite's driver keeps their prepared statements, see
 * sqlite/statement-cache.ts); a run only lists the values in column order. Rows whose columns
 * differ (one leaves a column out to take its default), or that hold an expression rather than
 * data, are built by Kysely as before.
 */

/** Statements kept per dialect; a group commit's row counts repeat, a few dozen at most in use. */
const KEPT = 64;

const SLOT_PREFIX = '\u0000herald-bulk:';

/** Compiled SQL by dialect adapter class (a process may hold stores of both backends: tests do). */
const compiledByDialect = new Map<unknown, Map<string, string>>();

type AnyDatabase = Record<string, Record<string, unknown>>;

/**
 * Inserts `rows` into `table`, all or none (in one statement, or on SQLite a few in one
 * transaction: statementRowCounts), and returns their `returning` columns (no order is promised:
 * RETURNING gives none). The caller bounds the rows per statement below the backends'
 * parameter limits (SQLite 32,766, PostgreSQL 65,535).
 */
export async function insertRows<Returned extends Record<string, unknown>>(
  db: Kysely<Database>,
  table: keyof Database & string,
  rows: readonly object[],
  returning: readonly (keyof Returned & string)[] = [],
): Promise<Returned[]> {
  if (rows.length === 0) return [];
  const columns = definedColumns(rows[0]!);
  const values = valuesInOrder(rows, columns);
  if (values === null) {
    const query = (db as unknown as Kysely<AnyDatabase>)
      .insertInto(table)
      .values(rows as AnyDatabase[string][]);
    if (returning.length === 0) {
      await query.execute();
      return [];
    }
    return (await query.returning([...returning]).execute()) as unknown as Returned[];
  }
  const counts = statementRowCounts(rows.length, db.getExecutor().adapter instanceof SqliteAdapter);
  if (counts.length === 1) {
    const text = statement(db, table, columns, returning, rows.length);
    return (await db.executeQuery<Returned>(CompiledQuery.raw(text, values))).rows as Returned[];
  }
  // Several statements, one insert: all of the rows or none, inside the caller's transaction or
  // in one of their own (a log's write is retried whole when it fails).
  const insertAll = async (trx: Kysely<Database>): Promise<Returned[]> => {
    const width = columns.length;
    const returned: Returned[] = [];
    let done = 0;
    for (const count of counts) {
      const text = statement(trx, table, columns, returning, count);
      const part = values.slice(done * width, (done + count) * width);
      for (const row of (await trx.executeQuery<Returned>(CompiledQuery.raw(text, part))).rows)
        returned.push(row as Returned);
      done += count;
    }
    return returned;
  };
  return db.isTransaction ? insertAll(db) : db.transaction().execute(insertAll);
}

/**
 * The row counts of the statements that insert `total` rows, `keptPrepared` when the backend's
 * driver keeps its statements prepared. SQLite's driver keeps each distinct statement prepared
 * (sqlite/statement-cache.ts), and a prepared multi-row INSERT holds a program in native memory
 * that grows with its rows: a statement per row count that a group commit happens to gather (1 to
 * 100 single sends, any batch size) kept megabytes of them. On SQLite the rows go in statements of
 * powers of two, the largest first (500 rows: 256, 128, 64, 32, 16, 4), so the inserts of one
 * list of columns have at most ten. PostgreSQL keeps no statement, and a statement more is a round
 * trip more, so there the rows go in one.
 */
export function statementRowCounts(total: number, keptPrepared: boolean): number[] {
  if (!keptPrepared) return [total];
  const counts: number[] = [];
  for (let left = total; left > 0;) {
    const count = 2 ** Math.floor(Math.log2(left));
    counts.push(count);
    left -= count;
  }
  return counts;
}

/** The columns a row names: its keys with a value (Kysely leaves an undefined one out). */
function definedColumns(row: object): string[] {
  const columns: string[] = [];
  for (const [column, value] of Object.entries(row)) if (value !== undefined) columns.push(column);
  return columns;
}

/** Every row's values in `columns`' order; null when a row names other columns or holds an expression. */
function valuesInOrder(rows: readonly object[], columns: readonly string[]): unknown[] | null {
  const values = new Array<unknown>(rows.length * columns.length);
  let next = 0;
  for (const row of rows as readonly Record<string, unknown>[]) {
    let named = 0;
    for (const column in row) if (row[column] !== undefined) named++;
    if (named !== columns.length) return null;
    for (const column of columns) {
      const value = row[column];
      if (!isBindable(value)) return null;
      values[next++] = value;
    }
  }
  return values;
}

/**
 * Whether a value is bound as it is: data, not an expression. Kysely writes an expression (sql``, a
 * builder, a function of one) into the statement itself, so rows holding one, or any other object,
 * are left to Kysely.
 */
function isBindable(value: unknown): boolean {
  if (value === null || value instanceof Uint8Array) return true;
  const type = typeof value;
  return type === 'string' || type === 'number' || type === 'bigint' || type === 'boolean';
}

/** The SQL of an insert of `count` rows of `columns`, compiled by Kysely for this dialect once. */
function statement(
  db: Kysely<Database>,
  table: string,
  columns: readonly string[],
  returning: readonly string[],
  count: number,
): string {
  const dialect = db.getExecutor().adapter.constructor;
  let kept = compiledByDialect.get(dialect);
  if (kept === undefined) compiledByDialect.set(dialect, (kept = new Map()));
  const key = JSON.stringify([table, columns, returning, count]);
  const known = kept.get(key);
  if (known !== undefined) return known;

  // Each value is a slot naming its place, so the compiled parameters can be checked to be the
  // values in row-major order: the order in which a run lists them.
  let slot = 0;
  const rows = Array.from({ length: count }, () =>
    Object.fromEntries(columns.map((column) => [column, `${SLOT_PREFIX}${slot++}`])),
  );
  const insert = (db as unknown as Kysely<AnyDatabase>).insertInto(table).values(rows);
  const query = (returning.length > 0 ? insert.returning(returning) : insert).compile();
  if (
    query.parameters.length !== slot ||
    query.parameters.some((parameter, i) => parameter !== `${SLOT_PREFIX}${i}`)
  )
    throw new Error(`the insert into ${table} does not bind its values in row order`);
  if (kept.size >= KEPT) kept.clear();
  kept.set(key, query.sql);
  return query.sql;
}
