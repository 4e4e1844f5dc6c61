import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/storage/postgres/open.js';
import type { Database } from '../../src/storage/schema.js';
import { openSqlite } from '../../src/storage/sqlite/open.js';
import type { Storage } from '../../src/storage/storage.js';
import { createPostgresDatabase } from '../helpers/database.js';

/**
 * The schema is written once and rendered per backend (src/storage/migrations.ts). Whatever the
 * rendering does, both backends must end up with the same tables, columns (name, order,
 * nullability, kind of type) and indexes (name, columns, uniqueness, partial or not), so that
 * every shared query means the same on both.
 */

interface Column {
  readonly name: string;
  readonly kind: 'integer' | 'text' | 'real' | 'bytes';
  readonly notNull: boolean;
}

interface Index {
  readonly name: string;
  readonly columns: string;
  readonly unique: boolean;
  readonly partial: boolean;
}

type Shape = Record<string, { columns: Column[]; indexes: Index[] }>;

function kindOf(type: string): Column['kind'] {
  const t = type.toLowerCase();
  if (t.includes('int')) return 'integer';
  if (t.includes('real') || t.includes('double')) return 'real';
  if (t.includes('text') || t.includes('char')) return 'text';
  if (t === 'blob' || t === 'bytea') return 'bytes';
  throw new Error(`unexpected column type ${type}`);
}

const IGNORED_TABLES = new Set(['herald_migrations', 'herald_migrations_lock', 'sqlite_sequence']);

async function sqliteShape(db: Kysely<Database>): Promise<Shape> {
  const shape: Shape = {};
  const tables = await sql<{ name: string }>`
    select name from sqlite_master where type = 'table' order by name`.execute(db);
  for (const { name } of tables.rows) {
    if (IGNORED_TABLES.has(name)) continue;
    const info = await sql<{ name: string; type: string; notnull: number; pk: number }>`
      select * from pragma_table_info(${name})`.execute(db);
    const list = await sql<{ name: string; unique: number; origin: string; partial: number }>`
      select * from pragma_index_list(${name})`.execute(db);
    const indexes: Index[] = [];
    for (const index of list.rows) {
      // Constraint indexes are named by SQLite itself (sqlite_autoindex_…); compare them by columns.
      const cols = await sql<{ name: string }>`select name from pragma_index_info(${index.name})`.execute(db);
      const columns = cols.rows.map((c) => c.name).join(',');
      indexes.push({
        name: index.origin === 'c' ? index.name : `${index.origin}:${columns}`,
        columns,
        unique: index.unique === 1,
        partial: index.partial === 1,
      });
    }
    shape[name] = {
      // SQLite reports an INTEGER PRIMARY KEY as nullable; it never is (it is the rowid).
      columns: info.rows.map((c) => ({
        name: c.name,
        kind: kindOf(c.type),
        notNull: c.notnull === 1 || c.pk > 0,
      })),
      indexes: indexes.sort((a, b) => a.name.localeCompare(b.name)),
    };
  }
  return shape;
}

async function postgresShape(db: Kysely<Database>): Promise<Shape> {
  const shape: Shape = {};
  const columns = await sql<{
    table_name: string;
    column_name: string;
    data_type: string;
    is_nullable: string;
  }>`
    select table_name, column_name, data_type, is_nullable from information_schema.columns
    where table_schema = 'public' order by table_name, ordinal_position`.execute(db);
  for (const c of columns.rows) {
    if (IGNORED_TABLES.has(c.table_name)) continue;
    (shape[c.table_name] ??= { columns: [], indexes: [] }).columns.push({
      name: c.column_name,
      kind: kindOf(c.data_type),
      notNull: c.is_nullable === 'NO',
    });
  }
  const indexes = await sql<{
    table: string;
    name: string;
    columns: string;
    unique: boolean;
    partial: boolean;
    origin: string;
  }>`
    select t.relname as table, i.relname as name,
      (select string_agg(a.attname, ',' order by k.ord) from unnest(x.indkey) with ordinality k(attnum, ord)
        join pg_attribute a on a.attrelid = t.oid and a.attnum = k.attnum) as columns,
      x.indisunique as unique, x.indpred is not null as partial,
      case when x.indisprimary then 'pk' when con.conname is not null then 'u' else 'c' end as origin
    from pg_index x
    join pg_class i on i.oid = x.indexrelid
    join pg_class t on t.oid = x.indrelid
    join pg_namespace n on n.oid = t.relnamespace
    left join pg_constraint con on con.conindid = x.indexrelid and con.contype = 'u'
    where n.nspname = 'public'`.execute(db);
  for (const index of indexes.rows) {
    if (IGNORED_TABLES.has(index.table)) continue;
    shape[index.table]!.indexes.push({
      name: index.origin === 'c' ? index.name : `${index.origin}:${index.columns}`,
      columns: index.columns,
      unique: index.unique,
      partial: index.partial,
    });
  }
  for (const table of Object.values(shape)) table.indexes.sort((a, b) => a.name.localeCompare(b.name));
  return shape;
}

/**
 * SQLite lists a primary key's index only where it is not the rowid, PostgreSQL always; both list
 * UNIQUE constraints. The comparison leaves out single-column integer primary keys, the rowid.
 */
function withoutRowidKeys(shape: Shape): Shape {
  return Object.fromEntries(
    Object.entries(shape).map(([name, table]) => [
      name,
      {
        ...table,
        indexes: table.indexes.filter((i) => !(i.name.startsWith('pk:') && !i.columns.includes(','))),
      },
    ]),
  );
}

let dir: string;
let sqlite: Storage;
let postgres: Storage;
let dropPostgres: () => Promise<void>;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'herald-parity-'));
  sqlite = openSqlite(path.join(dir, 'herald.db'));
  const database = await createPostgresDatabase();
  dropPostgres = database.drop;
  postgres = openPostgres({ url: database.url, poolSize: 2 });
  await Promise.all([sqlite.migrate(), postgres.migrate()]);
});

afterAll(async () => {
  await sqlite?.close();
  await postgres?.close();
  await dropPostgres?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('schema parity', () => {
  it('both backends end with the same tables, columns and indexes', async () => {
    const fromSqlite = withoutRowidKeys(await sqliteShape(sqlite.db));
    const fromPostgres = withoutRowidKeys(await postgresShape(postgres.db));
    expect(Object.keys(fromSqlite).sort()).toContain('notifications');
    expect(fromPostgres).toEqual(fromSqlite);
  });
});
