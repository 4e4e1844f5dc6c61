import type { Kysely } from 'kysely';
import type { ClaimRequest } from './claim.js';
import type { Queue, QueueRows, QueueTable, RenewRequest } from './queue.js';
import type { FileChunk } from './notification-files.js';
import type { Database, NewNotificationRow } from './schema.js';
import type { UsageDeltaRow } from './usage.js';

/** One key of an accepted row's metadata, before the row has an id. */
export interface AcceptedMetadata {
  readonly request_id: string;
  readonly key: string;
  readonly value: string;
}

/**
 * A storage backend: its connection, and every way the backends differ, listed here and nowhere
 * else. The queries that are the same on both live in the files beside this one, over `db`; what
 * differs is implemented in `sqlite/` and `postgres/`, each opening a `Storage` in its `open.ts`.
 */
export interface Storage {
  readonly kind: 'sqlite' | 'postgres';
  readonly db: Kysely<Database>;
  /**
   * Marks up to `limit` due ready rows of a queue as `sending` under a lease and returns them,
   * oldest due first. SQLite: its single writer makes one UPDATE atomic. PostgreSQL: `FOR UPDATE
   * SKIP LOCKED`, so concurrent workers take disjoint rows without waiting for each other.
   */
  claim<Table extends QueueTable>(queue: Queue<Table>, claim: ClaimRequest): Promise<QueueRows[Table][]>;
  /** Extends the leases a worker holds (PostgreSQL skips rows its own outcome commit has locked). */
  renew(queue: Queue, renew: RenewRequest): Promise<void>;
  /**
   * Inserts accepted notifications and their usage deltas with one statement, atomic without a
   * transaction (PostgreSQL's data-modifying WITH: one round trip instead of four). Undefined where
   * the backend has no such statement, or when the rows do not fit in one; the caller then
   * inserts them in a transaction. `metadata`: the rows' metadata index entries, by request id.
   */
  insertAccepted?(
    rows: readonly NewNotificationRow[],
    usage: readonly UsageDeltaRow[],
    metadata: readonly AcceptedMetadata[],
  ): Promise<Map<string, number> | undefined>;
  /**
   * Writes chunks of sends' files (at most a megabyte or so) in one transaction, before their
   * sends are accepted, durably; returns each chunk's file id (notification-files.ts). SQLite
   * writes them from a thread of its own (sqlite/file-writer.ts) while it holds the connection, so
   * the event loop never waits for the disk and transactions that queued meanwhile go first;
   * PostgreSQL in a transaction of its own. The chunks' buffers may be moved: not to be used after.
   */
  writeFileChunks(chunks: readonly FileChunk[], now: number): Promise<number[]>;
  /** Write transactions worth running at once (group-commit batches in flight). */
  readonly writeConcurrency: number;
  /**
   * Applies pending migrations; safe when several processes migrate the same database at once.
   * Resolves with the names of those this call applied, in order.
   */
  migrate(): Promise<readonly string[]>;
  /**
   * A number that changes whenever another connection may have changed what a process keeps in
   * memory, where the backend can tell cheaply: SQLite's data_version (any commit of another
   * connection), or on PostgreSQL the notices of changes to projects (in server processes, which
   * listen for them). Undefined where it cannot tell, and nothing is kept.
   */
  readonly externalChanges?: () => number;
  /**
   * How long after a change to projects commits until no process that keeps projects in memory
   * can still answer from before it (0 where every lookup checks first). A key rotation waits
   * this long before it reports success, so the old key is refused everywhere once it has.
   */
  readonly projectChangesSettleMs: number;
  /**
   * How long a change to a project's settings (its quota, its from address) waits before it
   * reports success. SQLite: as long as a key change (every process then serves the new values).
   * PostgreSQL: 0, since the notice reaches the other processes within milliseconds; the wait for
   * the worst case, seconds, is kept for key changes, where a refused key is a promise.
   */
  readonly projectUpdatesSettleMs: number;
  /**
   * A number that moves whenever another connection commits anything (SQLite's data_version);
   * undefined where the backend cannot tell cheaply. A worker claims again only when work may
   * have been committed elsewhere, instead of after every message.
   */
  readonly otherCommits?: () => number;
  /**
   * Tells the workers of other processes that work was committed in a queue, where they could not
   * tell by themselves (PostgreSQL: `NOTIFY`, postgres/work-notices.ts). Undefined where they can
   * (SQLite: `otherCommits`).
   */
  announceWork?(table: QueueTable): void;
  /** Listens for other processes' `announceWork` (a worker process on PostgreSQL). */
  onWorkElsewhere?(listener: (table: QueueTable) => void): void;
  /**
   * Removes the copies of erased content the backend keeps beside its tables (SQLite: the WAL,
   * checkpointed and truncated); true once none is left. Undefined where there are none.
   */
  forgetErased?(): Promise<boolean>;
  /** Throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
