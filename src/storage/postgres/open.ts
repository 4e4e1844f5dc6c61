import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../migrate.js';
import type { Database } from '../schema.js';
import type { Storage } from '../storage.js';
import { claimWith } from '../claim.js';
import { QUEUES, renewWith, type QueueTable } from '../queue.js';
import { claimPostgres, lockForRenewal } from './claim.js';
import { insertFileChunks } from '../notification-files.js';
import { insertAcceptedPostgres } from './insert-accepted.js';
import { migrationsFor, POSTGRES_TYPES } from '../migrations.js';
import { changesSettleMs, ProjectChanges, type ProjectChangesState } from './project-changes.js';
import { WorkNotices, type WorkNoticesState } from './work-notices.js';

// Ids and epoch-millisecond timestamps are BIGINT; they stay far below 2^53, so numbers are exact.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface PostgresOptions {
  readonly url: string;
  /** Connections per process; see docs/deployment.md for sizing against max_connections. */
  readonly poolSize?: number;
  /**
   * A server process listens for changes to projects on a connection of its own, so it can answer
   * API key lookups from memory (see project-changes.ts); a short CLI command does not.
   */
  readonly watchProjects?: boolean;
  /**
   * A worker process listens, on the same connection, for other processes' notices of queued work
   * (work-notices.ts), so it claims at once instead of at its next poll.
   */
  readonly watchWork?: boolean;
  /** Told when the listening connection starts listening and when it is lost. */
  readonly onProjectChanges?: (state: ProjectChangesState) => void;
  /** Told when this process's notices of queued work stop going out, and when they go out again. */
  readonly onWorkNotices?: (state: WorkNoticesState) => void;
  /** How often the listening connection is checked (tests shorten it); the same in every process. */
  readonly projectChangesCheckMs?: number;
  /** The token of this process's notices of queued work (work-notices.ts); a new one unless given. */
  readonly noticeToken?: string;
}

const QUEUE_TABLES = QUEUES.map((queue) => queue.table);

export function openPostgres(options: PostgresOptions): Storage {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // A connection whose peer vanished without a reset (a partition, a failover) fails its query
    // once TCP gives up on it (unanswered probes or retransmissions: minutes, by the kernel's
    // settings), instead of holding it, and whatever waits on it, for good.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // An idle client losing its connection (database restart) must not crash the process; the pool
  // discards it and the next query opens a new one.
  pool.on('error', () => {});
  // A client checked out of the pool has no pool listener: if its connection dies during a query
  // (database stopped, network cut), pg fails the query *and* emits 'error' on the client, which
  // unheard would crash the process. The failed query already reports the error to its caller
  // (a send answers 500), and the pool drops the broken client when it is released.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const notices = new WorkNotices(db, options.onWorkNotices, options.noticeToken);
  const workListeners: ((table: QueueTable) => void)[] = [];
  // Called from the listening connection's events: a listener that throws must not end the process.
  const tell = (table: QueueTable) => {
    for (const listener of workListeners) {
      try {
        listener(table);
      } catch (error) {
        console.error('a listener of work notices failed', error);
      }
    }
  };
  const changes =
    options.watchProjects || options.watchWork
      ? new ProjectChanges({
          url: options.url,
          onState: (state) => {
            options.onProjectChanges?.(state);
            // Notices sent before the connection listened (at start, during an outage) were lost:
            // the work they announced may be waiting.
            if (state.listening && options.watchWork) for (const table of QUEUE_TABLES) tell(table);
          },
          checkMs: options.projectChangesCheckMs,
          projects: options.watchProjects ?? false,
          ...(options.watchWork && {
            onWork: (payload: string) => {
              const table = notices.heard(payload);
              if (table !== null) tell(table);
            },
          }),
        })
      : null;
  return {
    kind: 'postgres',
    db,
    claim: (queue, claim) => claimWith(db, claimPostgres, queue, claim),
    renew: (queue, renew) => renewWith(db, queue, renew, lockForRenewal),
    insertAccepted: (rows, usage, metadata) => insertAcceptedPostgres(db, rows, usage, metadata),
    writeFileChunks: (chunks, now) => insertFileChunks(db, chunks, now),
    // The server commits several transactions in parallel and groups their log flushes itself,
    // so a few batches in flight keep it busy while each waits for its round trips.
    writeConcurrency: 4,
    ...(changes !== null && options.watchProjects && { externalChanges: () => changes.version() }),
    announceWork: (table) => notices.announce(table),
    ...(options.watchWork && { onWorkElsewhere: (listener) => workListeners.push(listener) }),
    projectChangesSettleMs: changesSettleMs(options.projectChangesCheckMs),
    projectUpdatesSettleMs: 0,
    // Kysely's Migrator takes an advisory lock and runs the migrations in a transaction, so a
    // second migrator waits, then finds nothing left to do.
    migrate: () => migrateToLatest(db, migrationsFor(POSTGRES_TYPES), { inTransaction: false }),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await notices.close();
      await changes?.close();
      await db.destroy();
    },
  };
}
