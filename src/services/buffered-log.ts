import type { Logger } from 'pino';
import { LOG_ROWS_PER_INSERT } from '../storage/log-tables.js';

/** Whose entry was dropped: a request with valid credentials, or one without. */
export type LogEntryKind = 'authenticated' | 'unauthenticated';

export interface BufferedLogOptions {
  /** How long an entry may wait for company before it is written. */
  readonly flushMs: number;
  /** Entries per write; a write starts at once when this many are waiting. */
  readonly batchSize: number;
  /** Entries waiting in memory at most (besides the batch being written). */
  readonly maxBuffered: number;
  /** After a failed write, the next is tried this long after (doubling up to `maxRetryMs`). */
  readonly retryMs: number;
  readonly maxRetryMs: number;
  /** Called for every entry dropped because the buffer was full. */
  readonly onDrop?: (kind: LogEntryKind) => void;
}

export const BUFFERED_LOG_DEFAULTS: BufferedLogOptions = {
  flushMs: 200,
  batchSize: LOG_ROWS_PER_INSERT,
  maxBuffered: 20_000,
  retryMs: 1000,
  maxRetryMs: 30_000,
};

/**
 * What a log writes and how it tells its entries apart, how it reads them back and prunes them;
 * `name` heads its warnings.
 */
export interface LogSink<Row, Filter, Listed> {
  readonly name: string;
  insert(rows: readonly Row[]): Promise<void>;
  kindOf(row: Row): LogEntryKind;
  list(filter: Filter): Promise<Listed[]>;
  /** Removes entries older than `before` and all but the newest `keep`; how many were removed. */
  prune(before: number, keep: number): Promise<number>;
}

/** A first-in first-out queue with O(1) removal at the front. */
class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Puts `items` back in front, in their order. */
  restore(items: readonly T[]): void {
    this.items = [...items, ...this.items.slice(this.head)];
    this.head = 0;
  }
}

interface Entry<Row> {
  /** Arrival order across both queues, so a write keeps the order requests were answered in. */
  readonly seq: number;
  readonly row: Row;
}

/**
 * Records entries without putting a write on the request's path: entries are buffered and written
 * in batches by one writer at a time, never by the request (the API log, the audit log).
 *
 * Anybody can add entries (a 401 is logged too), so everything here is bounded: at most
 * `maxBuffered` entries wait in memory, and when the store cannot take them (locked, full, down)
 * the oldest entries of requests without valid credentials are dropped first, then the oldest of
 * the rest, each counted (`onDrop`). A failed write is tried again on a timer with back-off, never
 * at once: retrying in the same turn of the event loop would starve every request of this process.
 */
export class BufferedLog<Row, Filter = never, Listed = never> {
  private readonly authenticated = new Fifo<Entry<Row>>();
  private readonly unauthenticated = new Fifo<Entry<Row>>();
  private seq = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  /** Consecutive failed writes; while above 0 a retry timer is set and no other write starts. */
  private failures = 0;
  private dropped = 0;
  private inFlight = 0;
  private readonly options: BufferedLogOptions;

  constructor(
    private readonly sink: LogSink<Row, Filter, Listed>,
    private readonly logger: Logger,
    options: Partial<BufferedLogOptions> = {},
  ) {
    this.options = { ...BUFFERED_LOG_DEFAULTS, ...options };
  }

  /** Entries held in memory: waiting, or in the write under way. */
  get buffered(): number {
    return this.waiting + this.inFlight;
  }

  private get waiting(): number {
    return this.authenticated.length + this.unauthenticated.length;
  }

  record(row: Row): void {
    this.queueOf(this.sink.kindOf(row)).push({ seq: this.seq++, row });
    this.enforceBound();
    if (this.writing !== null || this.failures > 0) return;
    if (this.waiting >= this.options.batchSize) this.startWriting();
    else this.timer ??= setTimeout(() => this.startWriting(), this.options.flushMs);
  }

  /** The stored entries that match `filter` (entries still buffered are not among them). */
  list(filter: Filter): Promise<Listed[]> {
    return this.sink.list(filter);
  }

  /** Removes stored entries older than `before`, and all but the newest `keep`; how many went. */
  prune(before: number, keep: number): Promise<number> {
    return this.sink.prune(before, keep);
  }

  /**
   * Writes what is buffered now and resolves once that is done or has failed (graceful stop,
   * tests). A pending retry is not waited for: it is tried now.
   */
  async flush(): Promise<void> {
    while (this.writing !== null) await this.writing;
    if (this.waiting === 0) return;
    this.startWriting();
    while (this.writing !== null) await this.writing;
  }

  private queueOf(kind: LogEntryKind): Fifo<Entry<Row>> {
    return kind === 'authenticated' ? this.authenticated : this.unauthenticated;
  }

  private startWriting(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.writing !== null) return;
    this.writing = this.writeAll().finally(() => {
      this.writing = null;
    });
  }

  /** Writes batch after batch until the buffer is empty or a write fails. */
  private async writeAll(): Promise<void> {
    while (this.waiting > 0) {
      const batch = this.take(this.options.batchSize);
      this.inFlight = batch.length;
      try {
        await this.sink.insert(batch.map((entry) => entry.row));
      } catch (error) {
        this.inFlight = 0;
        this.putBack(batch);
        this.failures++;
        const delay = Math.min(this.options.retryMs * 2 ** (this.failures - 1), this.options.maxRetryMs);
        this.logger.warn(
          { err: error, buffered: this.buffered, retryInMs: delay },
          `${this.sink.name} write failed; will retry`,
        );
        this.timer = setTimeout(() => {
          this.timer = null;
          this.startWriting();
        }, delay);
        this.timer.unref();
        return;
      }
      this.inFlight = 0;
      if (this.failures > 0) this.logger.info({ buffered: this.buffered }, `${this.sink.name} writes again`);
      this.failures = 0;
      this.reportDrops();
      // Let requests in between batches: a backlog of thousands is written over several turns.
      if (this.waiting > 0) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** The oldest `count` entries of both queues, in arrival order. */
  private take(count: number): Entry<Row>[] {
    const batch: Entry<Row>[] = [];
    while (batch.length < count) {
      const a = this.authenticated.peek();
      const u = this.unauthenticated.peek();
      if (a === undefined && u === undefined) break;
      const from =
        u === undefined || (a !== undefined && a.seq < u.seq) ? this.authenticated : this.unauthenticated;
      batch.push(from.shift()!);
    }
    return batch;
  }

  private putBack(batch: readonly Entry<Row>[]): void {
    this.authenticated.restore(batch.filter((entry) => this.sink.kindOf(entry.row) === 'authenticated'));
    this.unauthenticated.restore(batch.filter((entry) => this.sink.kindOf(entry.row) !== 'authenticated'));
    this.enforceBound();
  }

  /** Drops the oldest unauthenticated entries first, then the oldest authenticated ones. */
  private enforceBound(): void {
    while (this.waiting > this.options.maxBuffered) {
      const kind: LogEntryKind = this.unauthenticated.length > 0 ? 'unauthenticated' : 'authenticated';
      this.queueOf(kind).shift();
      this.dropped++;
      this.options.onDrop?.(kind);
    }
  }

  private reportDrops(): void {
    if (this.dropped === 0) return;
    this.logger.warn({ dropped: this.dropped }, `${this.sink.name} buffer was full; oldest entries dropped`);
    this.dropped = 0;
  }
}
