/**
 * Group commit: requests that arrive while a transaction is being written are gathered and written
 * together in the next one. With a durable (fsync-per-commit) database, the cost of a commit is
 * mostly the sync, so 100 rows per commit is several times faster than one row per commit, and no
 * request is answered before its own row is durable.
 */
export class GroupCommit<T, R> {
  private pending: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private scheduled = false;
  private running: Promise<void> | null = null;

  constructor(
    /** Writes a batch in one transaction; returns one result per item, in order. */
    private readonly commit: (items: readonly T[]) => Promise<R[]>,
    private readonly options: {
      readonly maxBatch?: number;
      /**
       * How long the first item of a batch may wait for company. 0 (the default) gathers what
       * arrived in the same event-loop turn; a few milliseconds gathers items that trickle in.
       */
      readonly maxDelayMs?: number;
    } = {},
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.scheduled && this.running === null) {
        this.scheduled = true;
        // setImmediate runs after the I/O callbacks of this loop turn, so every request already
        // parsed joins the same batch.
        const start = () => {
          this.scheduled = false;
          this.running = this.drain().finally(() => (this.running = null));
        };
        const delay = this.options.maxDelayMs ?? 0;
        if (delay > 0) setTimeout(start, delay);
        else setImmediate(start);
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.options.maxBatch ?? 100);
      try {
        const results = await this.commit(batch.map((entry) => entry.item));
        batch.forEach((entry, i) => entry.resolve(results[i]!));
      } catch (error) {
        // The transaction rolled back as a whole: nothing of this batch was stored.
        for (const entry of batch) entry.reject(error);
      }
    }
  }

  /** Resolves once everything submitted so far has been committed or refused. */
  async flush(): Promise<void> {
    while (this.running !== null || this.scheduled || this.pending.length > 0) {
      if (this.running !== null) await this.running;
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
