import { mkdirSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { runMigrations } from '../migrate.js';
import type { Database } from '../schema.js';
import type { Storage } from '../storage.js';
import { startCheckpointer, type CheckpointReport } from './checkpointer.js';
import { claimDueSqlite } from './claim.js';
import { renewLeasesSqlite } from './renew.js';
import { sqliteMigrations } from './migrations.js';
import { withStatementCache } from './statement-cache.js';

/**
 * The embedded backend: one SQLite file in WAL mode. `synchronous=FULL` makes every commit durable
 * before it returns, which is what lets a 202 promise that nothing is lost; throughput comes from
 * group commit (many accepted requests per transaction), not from weaker syncing.
 */
export interface SqliteOptions {
  /**
   * A long-running process (a server) checkpoints the WAL from a background thread; a short CLI
   * command leaves it to SQLite's automatic checkpoint.
   */
  readonly backgroundCheckpoint?: boolean;
  readonly onCheckpoint?: (report: CheckpointReport) => void;
}

/** WAL pages after which a commit checkpoints by itself (SQLite's default is 1000). */
const AUTO_CHECKPOINT_PAGES = 1000;
/** With the background thread checkpointing every second, only a stalled thread reaches this. */
const SAFETY_NET_CHECKPOINT_PAGES = 20_000;

export function openSqlite(file: string, options: SqliteOptions = {}): Storage {
  mkdirSync(path.dirname(file), { recursive: true });
  const connection = new BetterSqlite3(file);
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = FULL');
  connection.pragma('foreign_keys = ON');
  // The CLI and the server write the same file; a writer waits for the other instead of failing.
  connection.pragma('busy_timeout = 10000');
  const checkpointer = options.backgroundCheckpoint
    ? startCheckpointer(file, { onReport: options.onCheckpoint })
    : null;
  connection.pragma(
    `wal_autocheckpoint = ${checkpointer ? SAFETY_NET_CHECKPOINT_PAGES : AUTO_CHECKPOINT_PAGES}`,
  );
  const dataVersion = connection.prepare('PRAGMA data_version').pluck();
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: withStatementCache(connection) }),
  });
  return {
    kind: 'sqlite',
    db,
    claimDue: (claim) => claimDueSqlite(db, claim),
    renewLeases: (renew) => renewLeasesSqlite(db, renew),
    externalChanges: () => dataVersion.get() as number,
    migrate: () => runMigrations(db, sqliteMigrations, { sqlite: true }),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await checkpointer?.stop();
      await db.destroy();
    },
  };
}
