import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { insertApiLogs, listApiLogs, pruneApiLogs, type ApiLogFilter } from '../storage/api-logs.js';
import type { ApiLogRow, Database, NewApiLogRow } from '../storage/schema.js';

/**
 * Records every API request without putting a write on the request's path: entries are buffered
 * and written in batches. The buffer is bounded; if the database is unreachable for long, the
 * oldest entries are dropped (and counted in the log) rather than growing memory without limit.
 */
export class ApiLogService {
  private buffer: NewApiLogRow[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private dropped = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly logger: Logger,
    private readonly options = { flushMs: 200, batchSize: 500, maxBuffered: 20_000 },
  ) {}

  record(entry: NewApiLogRow): void {
    if (this.buffer.length >= this.options.maxBuffered) {
      this.buffer.shift();
      this.dropped++;
    }
    this.buffer.push(entry);
    if (this.buffer.length >= this.options.batchSize) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.options.flushMs);
  }

  async flush(): Promise<void> {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    // Wait for every write in progress, not only the one seen first: a flush that finds the buffer
    // taken by another flush must still return only once that write is done.
    while (this.writing !== null) await this.writing;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.writing = insertApiLogs(this.db, batch)
      .catch((error: unknown) => {
        this.logger.warn({ err: error, entries: batch.length }, 'API log write failed; will retry');
        this.buffer = batch.concat(this.buffer).slice(-this.options.maxBuffered);
      })
      .finally(() => (this.writing = null));
    await this.writing;
    if (this.dropped > 0) {
      this.logger.warn({ dropped: this.dropped }, 'API log buffer was full; oldest entries dropped');
      this.dropped = 0;
    }
  }

  list(filter: ApiLogFilter): Promise<ApiLogRow[]> {
    return listApiLogs(this.db, filter);
  }

  prune(before: number, keep: number): Promise<number> {
    // Requests without a valid key get a budget of their own, a tenth of the authenticated one:
    // anybody can send them, so they must never push out the entries of real callers.
    return pruneApiLogs(this.db, before, keep, Math.max(1, Math.floor(keep / 10)));
  }
}
