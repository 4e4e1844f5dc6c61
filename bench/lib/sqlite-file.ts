/**
 * The bench's only direct access to Herald's SQLite file (<HERALD_DATA_DIR>/herald.db):
 * seeding many stored notifications in one statement, and read-only counts by state.
 */
import { SqliteDatabase as Database } from '../../src/storage/sqlite/driver.js';

/** SQL for each known column of `notifications`, over the recursive counter `n`. */
const SEED_COLUMNS: Record<string, string> = {
  request_id: `'seed_' || n`,
  project_id: ':projectId',
  template: `'welcome'`,
  recipient: `'user' || n || '@example.org'`,
  data: `'{"user_name":"User ' || n || '","role":"member"}'`,
  type: `'email'`,
  state: `'sent'`,
  attempts: '1',
  run_at: ':t0 + n * :step',
  lease_until: 'NULL',
  lease_owner: 'NULL',
  error_message: 'NULL',
  transport: `'smtp'`,
  message_id: `'<seed.' || n || '@bench.invalid>'`,
  subject: `'Welcome User ' || n`,
  text_body: `'Hello User ' || n || ', your role is member.'`,
  html_body: 'NULL',
  created_at: ':t0 + n * :step',
  updated_at: ':t0 + n * :step + 40',
  sent_at: ':t0 + n * :step + 40',
};

interface ColumnInfo {
  name: string;
  notnull: number;
  dflt_value: unknown;
  pk: number;
}

/**
 * Inserts `count` notifications in state 'sent' for `projectId`, request_ids seed_1 … seed_COUNT,
 * created over the past week. Herald must not be running (the file is written directly).
 */
export function seedNotifications(dbFile: string, projectId: number, count: number): void {
  const db = new Database(dbFile, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 10000');
    db.pragma('synchronous = OFF');
    const columns = db.prepare('PRAGMA table_info(notifications)').all() as ColumnInfo[];
    if (columns.length === 0)
      throw new Error(`${dbFile} has no notifications table (did herald migrate run?)`);
    const unknown = columns.filter(
      (c) => SEED_COLUMNS[c.name] === undefined && c.notnull === 1 && c.dflt_value === null && c.pk === 0,
    );
    if (unknown.length > 0) {
      throw new Error(
        `notifications has required columns the bench cannot fill: ${unknown.map((c) => c.name).join(', ')}`,
      );
    }
    const used = columns.map((c) => c.name).filter((name) => SEED_COLUMNS[name] !== undefined);
    const weekMs = 7 * 24 * 3600 * 1000;
    const params = {
      projectId,
      count,
      t0: Date.now() - weekMs,
      step: Math.max(1, Math.floor(weekMs / count)),
    };
    const sql = `INSERT INTO notifications (${used.join(', ')})
      WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :count)
      SELECT ${used.map((name) => SEED_COLUMNS[name]).join(', ')} FROM seq`;
    db.transaction(() => db.prepare(sql).run(params))();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

export interface StateCounts {
  queued: number;
  sending: number;
  sent: number;
  failed: number;
}

export interface StateView {
  read(): StateCounts;
  /** error_message of one failed notification, to say why deliveries fail. */
  someError(): string | undefined;
  close(): void;
}

/** A read-only view of the notification counts by state; close() it when done. */
export function openStateCounts(dbFile: string): StateView {
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const statement = db.prepare('SELECT state, COUNT(*) AS n FROM notifications GROUP BY state');
  const error = db.prepare(
    "SELECT error_message AS message FROM notifications WHERE state = 'failed' AND error_message IS NOT NULL LIMIT 1",
  );
  return {
    someError: () => (error.get() as { message: string } | undefined)?.message,
    read() {
      const counts: StateCounts = { queued: 0, sending: 0, sent: 0, failed: 0 };
      for (const row of statement.all() as { state: string; n: number }[]) {
        if (row.state in counts) counts[row.state as keyof StateCounts] = row.n;
      }
      return counts;
    },
    close: () => db.close(),
  };
}
