/**
 * The baseline of the batch figure: a bare better-sqlite3 file, with the pragmas Herald's SQLite
 * connection sets (src/storage/sqlite/open.ts) and a `notifications` table shaped like Herald's
 * (src/storage/migrations.ts, 001_initial: the same columns, constraints and indexes), written with
 * one prepared multi-row INSERT per batch and one transaction per batch. No HTTP, no validation,
 * no rendering, no bookkeeping beyond the row itself: what storing a batch costs at the least.
 */
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import type { SendItem } from './herald-api.js';

/** 001_initial's notifications table; `projects` is cut down to the key its foreign key needs. */
const SCHEMA = [
  `CREATE TABLE projects (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE)`,
  `CREATE TABLE notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL UNIQUE,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    template TEXT NOT NULL,
    recipient TEXT NOT NULL,
    data TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    run_at INTEGER NOT NULL,
    lease_until INTEGER,
    lease_owner TEXT,
    error_message TEXT,
    transport TEXT,
    message_id TEXT,
    subject TEXT,
    text_body TEXT,
    html_body TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    sent_at INTEGER
  )`,
  `CREATE INDEX notifications_due ON notifications (run_at) WHERE state = 'queued'`,
  `CREATE INDEX notifications_leased ON notifications (lease_until) WHERE state = 'sending'`,
  `CREATE INDEX notifications_project_created ON notifications (project_id, created_at)`,
  `CREATE INDEX notifications_created ON notifications (created_at)`,
];

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
  db.prepare('INSERT INTO projects (id, name) VALUES (?, ?)').run(PROJECT_ID, 'bench');

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
        params[p++] = randomUUID();
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
