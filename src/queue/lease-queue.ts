import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { ClaimRequest } from '../storage/claim.js';
import { GroupCommit } from '../storage/group-commit.js';
import { isLockTimeout } from '../storage/lock-timeout.js';
import {
  releaseClaims,
  releaseUnseenClaims,
  unheldLeases,
  type Queue,
  type QueueRows,
  type QueueTable,
} from '../storage/queue.js';
import type { Database } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';
import { Trouble } from '../logger.js';

/** What a worker asks of a claim; the lease's owner and times are the queue's. */
export type ClaimFilter = Omit<ClaimRequest, 'now' | 'owner' | 'leaseUntil'>;

/** A finished job waiting for its outcome to be stored. */
export interface Finished<Row, Outcome> {
  readonly row: Row;
  readonly outcome: Outcome;
}

/**
 * Stores a group of outcomes in the transaction it is given: for each, whether it was stored
 * (false: the lease had been lost, and nothing of it was written). `afterCommit` runs an effect
 * once the transaction has committed (never when it rolls back).
 */
export type RecordOutcomes<Row, Outcome> = (
  tx: Kysely<Database>,
  finished: readonly Finished<Row, Outcome>[],
  afterCommit: (effect: () => void) => void,
) => Promise<boolean[]>;

export interface LeaseQueueOptions {
  /** The lease owner: this worker process (host, pid and a random part). */
  readonly owner: string;
  /** How long a claim is invisible to other workers; renewed every third of it while held. */
  readonly leaseMs: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

/** Retries of an outcome the store refused: from a second, doubling, at most half a minute apart. */
const RECORD_RETRY_MS = 1_000;
const RECORD_RETRY_MAX_MS = 30_000;

/**
 * One queue table as a worker process holds it: the rows it claimed (renewed while held), and the
 * way each of them leaves its hands, finished or released. An outcome is committed in a group with
 * others that finish at about the same time (with a durable commit per job the store, not the
 * work, would bound throughput), only while the lease is still this worker's; an outcome the store
 * cannot take (a full disk, a lost connection) is retried until it is stored, the lease held and
 * renewed meanwhile, because giving the row back would do the job twice.
 */
export class LeaseQueue<Table extends QueueTable, Outcome> {
  /** The rows held, each with the claim it was taken by (its `attempts`). */
  private readonly held = new Map<number, number>();
  private readonly recorder: GroupCommit<Finished<QueueRows[Table], Outcome>, boolean>;
  private readonly now: () => number;
  private renewTimer: NodeJS.Timeout | null = null;
  /** Set by `giveUp`: outcomes still refused are left to the lease (see `giveUp`). */
  private abandoned = false;
  /** Ends the waits of outcomes between two tries (`giveUp` ends them at once). */
  private readonly retryWaits = new Set<() => void>();
  /**
   * Set when a claim failed (it may have committed with its answer lost, leaving rows leased to
   * this worker that it never saw) or a release did: rows leased to this worker that it does not
   * hold. From this time on, each renewal gives back those whose lease has run out, until none is
   * left (`releaseUnseen`).
   */
  private unseenClaimsUntil: number | null = null;
  /** Counts the times the mark above was set, so a look that began before one does not clear it. */
  private unseenMarks = 0;
  /** The lease of each claim in flight: its rows are leased to this worker and not yet held. */
  private readonly claimsInFlight = new Set<{ readonly leaseUntil: number }>();
  private renewing: Promise<void> | null = null;

  constructor(
    private readonly storage: Storage,
    readonly queue: Queue<Table>,
    private readonly options: LeaseQueueOptions,
    record: RecordOutcomes<QueueRows[Table], Outcome>,
  ) {
    this.now = options.now ?? Date.now;
    // Outcomes trickle in one lane at a time; a few milliseconds of gathering lets a commit carry
    // dozens of them instead of one or two. Only the bookkeeping waits, never the work.
    this.recorder = new GroupCommit(
      (items) => this.recordGroup(record, items),
      // SQLite's lock held past the wait is the store's failure, not one item's: the group is
      // retried whole rather than item by item.
      { maxDelayMs: 10, maxBatch: 500, storeFailure: isLockTimeout },
    );
    this.renewTrouble = new Trouble(options.logger, 'renewing leases', 'warn', { queue: queue.table });
  }

  private readonly renewTrouble: Trouble;

  /** One group's transaction, then the effects its outcomes asked for once it committed. */
  private async recordGroup(
    record: RecordOutcomes<QueueRows[Table], Outcome>,
    items: readonly Finished<QueueRows[Table], Outcome>[],
  ): Promise<boolean[]> {
    const effects: (() => void)[] = [];
    const stored = await this.storage.db
      .transaction()
      .execute((tx) => record(tx, items, (effect) => effects.push(effect)));
    for (const effect of effects) {
      try {
        effect();
      } catch (err) {
        // The outcomes are stored: an effect that fails must not make the group look refused.
        this.options.logger.error(
          { err, queue: this.queue.table },
          'an effect after recording outcomes failed',
        );
      }
    }
    return stored;
  }

  get owner(): string {
    return this.options.owner;
  }

  /** The store's connection, for what a consumer reads about the rows it claimed. */
  get db(): Kysely<Database> {
    return this.storage.db;
  }

  /** Rows this worker holds a lease on: claimed and waiting, at work, or waiting to be recorded. */
  get holding(): number {
    return this.held.size;
  }

  /** Claims due rows for this worker; they are held (and renewed) until finished or released. */
  async claim(filter: ClaimFilter): Promise<QueueRows[Table][]> {
    const now = this.now();
    const inFlight = { leaseUntil: now + this.options.leaseMs };
    // One renewal at a time: one that hangs on the store must not be joined by another each tick.
    this.renewTimer ??= setInterval(
      () => (this.renewing ??= this.renew().finally(() => (this.renewing = null))),
      Math.max(100, Math.floor(this.options.leaseMs / 3)),
    );
    this.claimsInFlight.add(inFlight);
    let rows: QueueRows[Table][];
    try {
      rows = await this.storage.claim(this.queue, {
        ...filter,
        now,
        owner: this.options.owner,
        leaseUntil: inFlight.leaseUntil,
      });
    } catch (err) {
      this.markUnseen(inFlight.leaseUntil);
      throw err;
    } finally {
      this.claimsInFlight.delete(inFlight);
    }
    for (const row of rows) this.held.set(row.id, row.attempts);
    return rows;
  }

  /**
   * Claims due rows, then reads what working them takes (`read`: their events, their recipients'
   * suppressions). When the read fails the rows are given back before its error is passed on, so
   * no row stays leased to a worker that will never work it.
   */
  async claimAndRead<Extra>(
    filter: ClaimFilter,
    read: (rows: readonly QueueRows[Table][]) => Promise<Extra>,
  ): Promise<{ rows: QueueRows[Table][]; extra: Extra }> {
    const rows = await this.claim(filter);
    try {
      return { rows, extra: await read(rows) };
    } catch (err) {
      await this.release(rows);
      throw err;
    }
  }

  /**
   * Stores a job's outcome; resolves once it is durable, or once the lease turned out to be lost
   * (false). Retries while the store refuses it.
   */
  async finish(row: QueueRows[Table], outcome: Outcome): Promise<boolean> {
    for (let retry = 0; ; retry++) {
      try {
        const stored = await this.recorder.submit({ row, outcome });
        // Not stored: the row is no longer leased under this claim. If it is leased to this worker
        // under a later one it never saw (a claim whose answer was lost), it must be swept.
        if (this.letGo(row) && !stored) this.markUnseen(this.now() + this.options.leaseMs);
        return stored;
      } catch (err) {
        if (this.abandoned) throw err;
        if (retry === 0)
          this.options.logger.error(
            { err, queue: this.queue.table, id: row.id },
            'recording an outcome failed; holding the lease and retrying until it is stored',
          );
        await this.waitToRetry(Math.min(RECORD_RETRY_MS * 2 ** retry, RECORD_RETRY_MAX_MS));
        if (this.abandoned) throw err;
      }
    }
  }

  /**
   * Gives claimed rows back to the queue without counting an attempt (work never started). When
   * the store refuses (a lost connection, a full disk), they are no longer held or renewed, and are
   * given back like a lost claim's rows once their lease has run out; nothing is thrown.
   */
  async release(rows: readonly QueueRows[Table][]): Promise<void> {
    // A row held under a later claim (taken again after this worker was judged dead during a
    // pause) stays: giving it back would take it from the job now working it.
    const ids = rows.filter((row) => this.letGo(row) || !this.held.has(row.id)).map((row) => row.id);
    if (ids.length === 0) return;
    try {
      await releaseClaims(this.storage.db, this.queue, ids, this.options.owner, this.now());
    } catch (err) {
      // A renewal that began before they were let go may still move their lease on from now.
      this.markUnseen(this.now() + this.options.leaseMs);
      this.options.logger.warn(
        { err, queue: this.queue.table, rows: ids.length },
        'giving claimed rows back failed; they return to the queue once their lease has run out',
      );
    }
  }

  /**
   * Ends a held row's claim with a change of the caller's instead of an outcome (a cancel before
   * the work began): `write` runs in a transaction of its own and returns undefined when it did not
   * apply. Once it has applied the row is no longer held; until then it stays held, for the caller
   * to work.
   */
  async settle<Result>(
    row: QueueRows[Table],
    write: (tx: Kysely<Database>) => Promise<Result | undefined>,
  ): Promise<Result | undefined> {
    const result = await this.storage.db.transaction().execute(write);
    if (result !== undefined) this.letGo(row);
    return result;
  }

  /** Waits until every outcome submitted so far has been committed or refused. */
  flush(): Promise<void> {
    return this.recorder.flush();
  }

  /**
   * A stopping worker whose outcomes the store still refuses stops retrying them. Their rows keep
   * this worker's lease: its heartbeat, left to go stale, returns them to the queue once another
   * worker judges this one dead, so they are done again (the only duplicate a stop can cause).
   */
  giveUp(): void {
    this.abandoned = true;
    for (const end of [...this.retryWaits]) end();
  }

  /** Stops renewing. Whatever is still held stays leased to this worker (see `giveUp`). */
  close(): void {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    this.renewTimer = null;
  }

  /** Stops holding a row, unless it is held under another claim than this one; says whether it did. */
  private letGo(row: QueueRows[Table]): boolean {
    return this.held.get(row.id) === row.attempts && this.held.delete(row.id);
  }

  private markUnseen(leaseUntil: number): void {
    this.unseenClaimsUntil = Math.max(this.unseenClaimsUntil ?? 0, leaseUntil);
    this.unseenMarks++;
  }

  private waitToRetry(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.retryWaits.delete(end);
        resolve();
      };
      const timer = setTimeout(end, ms);
      this.retryWaits.add(end);
    });
  }

  private async renew(): Promise<void> {
    if (this.held.size > 0) {
      try {
        await this.storage.renew(this.queue, {
          ids: [...this.held.keys()],
          owner: this.options.owner,
          leaseUntil: this.now() + this.options.leaseMs,
        });
      } catch (err) {
        this.renewTrouble.failed(err, 'retrying at the next renewal');
        return;
      }
      this.renewTrouble.succeeded();
    }
    await this.releaseUnseen();
  }

  /**
   * Gives back the rows leased to this worker that it does not hold (a failed claim's, a failed
   * release's) once their lease has run out. Not the rows of a claim still in flight: they are
   * leased to this worker too, and may be held in a moment. The mark is cleared only when no such
   * row is left, so a lease that runs out later than the mark foresaw (a clock that stepped back)
   * is still given back at a later renewal.
   */
  private async releaseUnseen(): Promise<void> {
    const until = this.unseenClaimsUntil;
    const now = this.now();
    if (until === null || now <= until) return;
    const marks = this.unseenMarks;
    const expiredBefore = Math.min(now, ...[...this.claimsInFlight].map((claim) => claim.leaseUntil));
    try {
      const returned = await releaseUnseenClaims(
        this.storage.db,
        this.queue,
        this.options.owner,
        [...this.held.keys()],
        now,
        expiredBefore,
      );
      if (returned > 0)
        this.options.logger.warn(
          { queue: this.queue.table, returned },
          'rows a failed claim or release had left leased to this worker returned to the queue',
        );
      const left = await unheldLeases(this.storage.db, this.queue, this.options.owner, [...this.held.keys()]);
      // A claim that failed meanwhile set the mark again: its rows are looked for at the next renewal.
      if (left === 0 && this.claimsInFlight.size === 0 && this.unseenMarks === marks)
        this.unseenClaimsUntil = null;
    } catch (err) {
      this.options.logger.warn({ err, queue: this.queue.table }, 'returning unseen claims failed');
    }
  }
}
