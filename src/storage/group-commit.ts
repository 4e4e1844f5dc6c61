/**
 * Group commit: requests that arrive while a transaction is being written are gathered and written
 * together in the next one. With a durable (fsync-per-commit) database, the cost of a commit is
 * mostly the sync, so 100 rows per commit is several times faster than one row per commit, and no
 * request is answered before its own row is durable.
 *
 * One item never fails another: when a batch's transaction fails, nothing of it was stored, and
 * each of its items is committed again on its own, so a bad item is answered with its own error
 * and the others with their own results.
 */
export interface GroupCommitOptions<T = unknown> {
  readonly maxBatch?: number;
  /**
   * How long the first item of a batch may wait for company. 0 (the default) gathers what arrived
   * in the same event-loop turn; a few milliseconds gathers items that trickle in.
   */
  readonly maxDelayMs?: number;
  /**
   * Batches in flight at once. SQLite has one writer, so 1; a server database commits several
   * transactions in parallel (and groups their log flushes itself), so more keeps it busy while
   * one batch waits for its round trips.
   */
  readonly concurrency?: number;
  /**
   * Whether a failure is the store's, not any item's (SQLite's lock held past the wait by another
   * process): the whole batch is refused at once, since committing its items one by one would
   * only wait that long again for each of them.
   */
  readonly storeFailure?: (error: unknown) => boolean;
  /**
   * Whose an item is: a batch takes the waiting items of each key in turn, one at a time, so one
   * key's burst does not fill batch after batch while another key's item waits behind it. Without
   * it every item is taken in the order it came.
   */
  readonly keyOf?: (item: T) => string;
}

interface Entry<T, R> {
  readonly item: T;
  readonly resolve: (result: R) => void;
  readonly reject: (error: unknown) => void;
}

export class GroupCommit<T, R> {
  /** Waiting items by key, keys in the order they are served (the key last served goes to the back). */
  private readonly waiting = new Map<string, Entry<T, R>[]>();
  private count = 0;
  private scheduled = false;
  private active = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    /** Writes a batch in one transaction; returns one result per item, in order. */
    private readonly commit: (items: readonly T[]) => Promise<R[]>,
    private readonly options: GroupCommitOptions<T> = {},
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const key = this.options.keyOf?.(item) ?? '';
      const list = this.waiting.get(key);
      if (list === undefined) this.waiting.set(key, [{ item, resolve, reject }]);
      else list.push({ item, resolve, reject });
      this.count++;
      this.schedule();
    });
  }

  /** The next batch: up to maxBatch items, taken from each key in turn. */
  private nextBatch(): Entry<T, R>[] {
    const batch: Entry<T, R>[] = [];
    const maxBatch = this.options.maxBatch ?? 100;
    while (this.count > 0 && batch.length < maxBatch) {
      const [key, list] = this.waiting.entries().next().value as [string, Entry<T, R>[]];
      if (this.waiting.size === 1) {
        // No other key to take turns with: its items go in at once. Moving the key to the back
        // for each item would churn the map's table, garbage that outlives the batch under load.
        const taken = list.splice(0, maxBatch - batch.length);
        for (const entry of taken) batch.push(entry);
        this.count -= taken.length;
        if (list.length === 0) this.waiting.delete(key);
        break;
      }
      batch.push(list.shift()!);
      this.count--;
      this.waiting.delete(key);
      if (list.length > 0) this.waiting.set(key, list);
    }
    return batch;
  }

  private schedule(): void {
    if (this.scheduled || this.active >= (this.options.concurrency ?? 1)) return;
    this.scheduled = true;
    const start = () => {
      this.scheduled = false;
      this.startBatches();
    };
    // setImmediate runs after the I/O callbacks of this loop turn, so every request already
    // parsed joins the same batch.
    const delay = this.options.maxDelayMs ?? 0;
    if (delay > 0) setTimeout(start, delay);
    else setImmediate(start);
  }

  private startBatches(): void {
    while (this.count > 0 && this.active < (this.options.concurrency ?? 1)) {
      const batch = this.nextBatch();
      this.active++;
      this.commit(batch.map((entry) => entry.item))
        .then(
          (results) => batch.forEach((entry, i) => entry.resolve(results[i]!)),
          // The transaction rolled back as a whole: nothing of this batch was stored.
          (error: unknown) =>
            batch.length === 1 || this.options.storeFailure?.(error) === true
              ? batch.forEach((entry) => entry.reject(error))
              : this.isolate(batch),
        )
        .finally(() => {
          this.active--;
          // What arrived while this batch was written has waited long enough: write it now.
          if (this.count > 0) this.startBatches();
          else if (this.active === 0 && !this.scheduled) this.wakeIdleWaiters();
        });
    }
  }

  /**
   * Commits each item of a failed batch in a transaction of its own, one after another: the batch
   * may have failed because the store is struggling, and hundreds of transactions at once would
   * only add to that (and exhaust a PostgreSQL pool).
   */
  private async isolate(batch: readonly Entry<T, R>[]): Promise<void> {
    for (const entry of batch) {
      await this.commit([entry.item]).then(
        (results) => entry.resolve(results[0]!),
        (error: unknown) => entry.reject(error),
      );
    }
  }

  private wakeIdleWaiters(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves once everything submitted so far has been committed or refused. */
  async flush(): Promise<void> {
    while (this.count > 0 || this.active > 0 || this.scheduled) {
      if (this.active > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
