import {
  CompiledQuery,
  SqliteDialect,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  type QueryResult,
} from 'kysely';

/**
 * Waits for SQLite's write lock without stopping the event loop.
 *
 * Several processes write one SQLite file: a server and the CLI, or an API process and a worker
 * process beside it. SQLite's own busy handler waits for the other writer by sleeping inside the
 * call, which in Node is the whole event loop, and in steps that grow to 25 ms and more while the
 * lock is usually held for a commit of a millisecond or two: measured with an API and a worker
 * process at 1,850 requests a second, the worker's event loop stood still for up to 81 ms per wait.
 *
 * Here the connection's busy timeout is 0, so a statement that finds the lock taken fails at once
 * with SQLITE_BUSY having done nothing, and it is run again after a timer of a millisecond,
 * while the event loop serves everything else. Kysely holds the single connection for a whole
 * transaction, so nothing else runs on it in between. SQLITE_BUSY_SNAPSHOT (a read transaction
 * that another writer overtook) cannot succeed on a retry and is thrown at once.
 */
export class LockWaitingSqliteDialect extends SqliteDialect {
  constructor(
    config: ConstructorParameters<typeof SqliteDialect>[0],
    private readonly wait: LockWait,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return new LockWaitingDriver(super.createDriver(), this.wait);
  }
}

export interface LockWait {
  /** How long a statement waits for the lock before its SQLITE_BUSY is thrown. */
  readonly timeoutMs: number;
  /**
   * Whether the connection is inside a transaction. There a refused statement is not run again:
   * SQLite may have rolled the whole transaction back, and a retry would then run on its own.
   * (In WAL mode with BEGIN IMMEDIATE nothing inside a transaction waits for a lock.)
   */
  readonly inTransaction: () => boolean;
}

/** Error codes of a statement that did nothing because another connection holds a lock. */
const RETRYABLE = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_RECOVERY']);

function isBusy(error: unknown): boolean {
  return RETRYABLE.has((error as { code?: unknown } | null)?.code as string);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class LockWaitingConnection implements DatabaseConnection {
  constructor(
    private readonly inner: DatabaseConnection,
    private readonly wait: LockWait,
  ) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    // better-sqlite3 runs the statement synchronously: the common case costs no extra await.
    try {
      return this.inner.executeQuery<R>(query);
    } catch (error) {
      if (!isBusy(error) || !this.mayRunAgain(query)) throw error;
      return this.retry<R>(query, error);
    }
  }

  /** Outside a transaction a refused statement did nothing; a refused COMMIT keeps its transaction. */
  private mayRunAgain(query: CompiledQuery): boolean {
    return !this.wait.inTransaction() || query.sql === 'commit';
  }

  private async retry<R>(query: CompiledQuery, first: unknown): Promise<QueryResult<R>> {
    const deadline = performance.now() + this.wait.timeoutMs;
    let last = first;
    for (let attempt = 1; performance.now() < deadline; attempt++) {
      // A millisecond at first, as the other writer's commit takes about that; a writer that
      // holds on longer (a migration, a long erase) is asked less often.
      await sleep(attempt <= 50 ? 1 : 5);
      try {
        return await this.inner.executeQuery<R>(query);
      } catch (error) {
        if (!isBusy(error) || !this.mayRunAgain(query)) throw error;
        last = error;
      }
    }
    throw last;
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

class LockWaitingDriver implements Driver {
  constructor(
    private readonly inner: Driver,
    private readonly wait: LockWait,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return new LockWaitingConnection(await this.inner.acquireConnection(), this.wait);
  }

  /**
   * Transactions take the write lock as they begin (BEGIN IMMEDIATE), where a refusal leaves no
   * transaction open and the BEGIN is simply run again. A deferred BEGIN would take it at the
   * first write, and a write refused inside a transaction keeps its read snapshot, which another
   * writer's commit then makes stale: the retry could only fail.
   */
  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(connection);
  }

  /**
   * After some errors (SQLITE_FULL or SQLITE_IOERR from a full or failing disk, a trigger's
   * RAISE(ROLLBACK)) SQLite has already rolled the whole transaction back. A ROLLBACK then fails
   * with "no transaction is active", and that error would be reported in place of the one that
   * says what went wrong.
   */
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.wait.inTransaction()) await this.inner.rollbackTransaction(connection);
  }

  savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']) {
    return this.inner.savepoint!(connection, name, compile);
  }

  rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']) {
    return this.inner.rollbackToSavepoint!(connection, name, compile);
  }

  releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']) {
    return this.inner.releaseSavepoint!(connection, name, compile);
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(connection);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}
