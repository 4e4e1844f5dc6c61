/**
 * The baseline of the batch figure: a bare better-sqlite3 file, with the pragmas Herald's SQLite
 * connection sets (src/storage/sqlite/open.ts) and Herald's own 001_initial schema (the same
 * columns, constraints and indexes), written with
 * one prepared multi-row INSERT per batch and one transaction per batch. No HTTP, no validation,
 * no rendering, no bookkeeping beyond the row itself: what storing a batch costs at the least.
 */
import { v7 as uuidv7 } from 'uuid';
import { SqliteDatabase as Database } from '../../src/storage/sqlite/driver.js';
import { renderMigrations, SQLITE_TYPES } from '../../src/storage/migrations.js';
import type { SendItem } from './herald-api.js';

/**
 * Herald's first schema, from the migration itself rather than a copy of it: the notifications
 * table with its constraints and indexes (and the other tables of 001_initial, which stay empty).
 */
const SCHEMA = renderMigrations(SQLITE_TYPES)['001_initial']!;

/** The columns Herald fills when it accepts a send (src/services/notifications.ts, admit()). */
const COLUMNS = [
  'request_id',
  'project_id',
  'template',
  'recipient',
  'data',
  'type',
  'state',
  'attempts',
  'run_at',
  'created_at',
  'updated_at',
] as const;

const PROJECT_ID = 1;

/** SAFETY_NET_CHECKPOINT_PAGES of src/storage/sqlite/open.ts, which a server's connection sets. */
const WAL_AUTOCHECKPOINT_PAGES = 20_000;

export interface BareSqlite {
  readonly file: string;
  /** Inserts one batch of exactly `batchSize` sends as queued notifications, in one transaction. */
  insertBatch(items: readonly SendItem[]): void;
  close(): void;
}

/** Creates `file` (it must not exist yet) with the schema above and one project. */
export function openBareSqlite(file: string, batchSize: number): BareSqlite {
  const db = new Database(file);
  // The pragmas of Herald's server connection. Its wal_autocheckpoint is a safety net, since a
  // background thread checkpoints every second; the baseline has no such thread, so its commits
  // checkpoint inline, but only every 20,000 pages (with SQLite's default of 1,000 they would
  // checkpoint every few batches and the baseline would be some 25% slower).
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('secure_delete = ON');
  db.pragma('busy_timeout = 10000');
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
  for (const statement of SCHEMA) db.exec(statement);
  db.prepare(
    `INSERT INTO projects (id, name, quota_period, api_key_hash, api_key_prefix, created_at, updated_at)
     VALUES (?, 'bench', 'month', 'bench', 'bench', 0, 0)`,
  ).run(PROJECT_ID);

  const row = `(${COLUMNS.map(() => '?').join(', ')})`;
  const insert = db.prepare(
    `INSERT INTO notifications (${COLUMNS.join(', ')}) VALUES ${Array.from({ length: batchSize }, () => row).join(', ')}`,
  );
  const params: unknown[] = new Array<unknown>(batchSize * COLUMNS.length);
  const store = db.transaction(() => insert.run(params));
  return {
    file,
    insertBatch(items) {
      if (items.length !== batchSize)
        throw new Error(`bare SQLite: a batch has ${items.length} sends, the statement takes ${batchSize}`);
      const now = Date.now();
      let p = 0;
      for (const item of items) {
        params[p++] = uuidv7();
        params[p++] = PROJECT_ID;
        params[p++] = item.template;
        params[p++] = item.to;
        params[p++] = JSON.stringify(item.data);
        params[p++] = 'email';
        params[p++] = 'queued';
        params[p++] = 0;
        params[p++] = now;
        params[p++] = now;
        params[p++] = now;
      }
      store();
    },
    close: () => db.close(),
  };
}
