import { chmodSync, closeSync, openSync, statSync } from 'node:fs';
import path from 'node:path';
import { Kysely, sql } from 'kysely';
import { makeDirectory } from '../directory.js';
import { isLockTimeout } from '../lock-timeout.js';
import type { Database } from '../schema.js';
import type { Storage } from '../storage.js';
import { startCheckpointer, type CheckpointReport } from './checkpointer.js';
import { claimSqlite } from './claim.js';
import { claimWith } from '../claim.js';
import { renewWith } from '../queue.js';
import { SqliteDatabase } from './driver.js';
import { fileWriter } from './file-writer.js';
import { LockWaitingSqliteDialect } from './lock-wait.js';
import { migrateSqlite } from './migrate.js';
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

/** How long a writer waits for another process to release the write lock before failing. */
const LOCK_WAIT_MS = 10_000;

/**
 * How long one read of data_version answers the key cache. Read per lookup, it cost the accept
 * path a twelfth of its time (each read takes the WAL's read lock).
 */
const CHANGES_READ_MS = 5;
/**
 * How long a change to projects waits before it reports success: longer than CHANGES_READ_MS, so
 * a lookup that begins after it uses a read taken after the change committed.
 */
const CHANGES_SETTLE_MS = 2 * CHANGES_READ_MS;

/** WAL pages after which a commit checkpoints by itself (SQLite's default is 1000). */
const AUTO_CHECKPOINT_PAGES = 1000;
/** With the background thread checkpointing every second, only a stalled thread reaches this. */
const SAFETY_NET_CHECKPOINT_PAGES = 20_000;

/**
 * The database holds API key hashes, encrypted SMTP passwords and mail content: only its owner may
 * read it. The file is created 0600 before SQLite opens it, because SQLite gives the -wal and -shm
 * files the mode of the database file; a file left readable by an older version is tightened.
 */
function restrictToOwner(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    for (const f of [file, `${file}-wal`, `${file}-shm`]) {
      try {
        if ((statSync(f).mode & 0o077) !== 0) chmodSync(f, 0o600);
      } catch {
        // Missing, or not ours to change: SQLite reports real trouble when it opens the file.
      }
    }
  }
}

export function openSqlite(file: string, options: SqliteOptions = {}): Storage {
  makeDirectory(path.dirname(file), 0o700);
  restrictToOwner(file);
  const connection = new SqliteDatabase(file);
  // Readers never wait for the writer, and a transaction begun with BEGIN IMMEDIATE never waits
  // for a lock after its start (lock-wait.ts relies on it).
  const mode = connection.pragma('journal_mode = WAL', { simple: true }) as string;
  if (mode !== 'wal') {
    connection.close();
    throw new Error(`SQLite cannot use WAL mode for ${file} (it stays in ${mode} mode); Herald needs it`);
  }
  connection.pragma('synchronous = FULL');
  connection.pragma('foreign_keys = ON');
  // Deleted and overwritten content (erased placeholder values, old rows) is zeroed on disk, not
  // left in free space where a copy of the file would still hold it.
  connection.pragma('secure_delete = ON');
  // The CLI and the server, or an API and a worker process, write the same file: a writer waits
  // for the other instead of failing, but in LockWaitingSqliteDialect, not asleep inside SQLite.
  connection.pragma('busy_timeout = 0');
  const checkpointer = options.backgroundCheckpoint
    ? startCheckpointer(file, { onReport: options.onCheckpoint })
    : null;
  connection.pragma(
    `wal_autocheckpoint = ${checkpointer ? SAFETY_NET_CHECKPOINT_PAGES : AUTO_CHECKPOINT_PAGES}`,
  );
  const dataVersionStatement = connection.prepare('PRAGMA data_version').pluck();
  // A read waits for no lock in WAL mode, except while another process recovers the WAL after a
  // crash; then the version is one never seen before, so nothing is answered from memory.
  let unknownVersion = 0;
  const dataVersion = (): number => {
    try {
      return dataVersionStatement.get() as number;
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      return --unknownVersion;
    }
  };
  const db = new Kysely<Database>({
    dialect: new LockWaitingSqliteDialect(
      { database: withStatementCache(connection) },
      { timeoutMs: LOCK_WAIT_MS, inTransaction: () => connection.inTransaction },
    ),
  });
  const files = fileWriter(file, LOCK_WAIT_MS);
  return {
    kind: 'sqlite',
    db,
    // The connection is held while the thread writes: transactions that queue meanwhile (another
    // project's small sends) run before the next chunks, never behind a whole file.
    writeFileChunks: (chunks, now) => db.connection().execute(() => files.write(chunks, now)),
    claim: (queue, claim) => claimWith(db, claimSqlite, queue, claim),
    renew: (queue, renew) => renewWith(db, queue, renew),
    externalChanges: readAtMostEvery(CHANGES_READ_MS, dataVersion),
    otherCommits: dataVersion,
    projectChangesSettleMs: CHANGES_SETTLE_MS,
    projectUpdatesSettleMs: CHANGES_SETTLE_MS,
    // One writer at a time: a second transaction would only wait for the file lock.
    writeConcurrency: 1,
    migrate: () => migrateSqlite(db),
    // Erased content is zeroed in the database file (secure_delete), but the WAL still holds the
    // pages as they were before, until it is overwritten: it is checkpointed and truncated.
    forgetErased: async () => {
      if (checkpointer !== null) return checkpointer.truncate();
      const [result] = connection.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      return result?.busy !== 1;
    },
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await files.stop();
      await checkpointer?.stop();
      await db.destroy();
    },
  };
}

/**
 * `read`, called again only once `ms` have passed since its last call began. An answer is thus
 * never older than `ms`: what committed more than `ms` before a call is in its answer.
 */
export function readAtMostEvery(ms: number, read: () => number): () => number {
  let value = 0;
  let readAt = -Infinity;
  return () => {
    const now = performance.now();
    if (now - readAt >= ms) {
      // A read that throws leaves nothing to reuse: the next call reads again.
      value = read();
      readAt = now;
    }
    return value;
  };
}
