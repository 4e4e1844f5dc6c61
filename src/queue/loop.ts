import type { Logger } from 'pino';
import { nextDueAt, type Queue } from '../storage/queue.js';
import type { Storage } from '../storage/storage.js';
import { Trouble } from '../logger.js';

/**
 * What works a queue: mail delivery, webhook delivery. It decides what to claim and how much may
 * run at once (its lanes); the loop decides when to claim, sleeps, wakes and stops.
 */
export interface Consumer {
  /** Whether it would take more rows now (false while its lanes and waiting rows are full). */
  hasRoom(): boolean;
  /** Whether work is in flight: the loop then watches for rows falling due while it waits. */
  busy(): boolean;
  /** Claims what it has room for and starts it. */
  fill(): Promise<Fill>;
  /**
   * Answers what waits on the rows it holds (a cancel: mail-consumer.ts): asked after every wake
   * and at least once per poll, whether or not it has room.
   */
  answerRequests?(): Promise<void>;
  /** Whether something its last claim left out has room again: the loop then claims again. */
  roomReturned?(): boolean;
  /** When something it holds back by time (not for want of room) may be claimed; null for nothing. */
  claimableAt?(): number | null;
  /** Stops taking work: waits for work in flight until `deadline`, and gives back the rest. */
  drain(deadline: number): Promise<void>;
}

export interface Fill {
  readonly claimed: number;
  /** It got all it asked for: more rows may be due. */
  readonly full: boolean;
  /** It left some rows out (projects whose lanes are full). */
  readonly filtered: boolean;
}

export interface LoopOptions {
  /** The longest sleep: how soon work that nothing announced is found. */
  readonly pollMs: number;
  readonly stopTimeoutMs: number;
}

/** How often a loop, asleep or busy, looks for other processes' commits (SQLite's data_version). */
const WATCH_MS = 10;

/** How often a loop with work in flight looks for rows falling due by time (see `delay`). */
const DUE_LOOK_MS = 100;

/**
 * The claim loop of one queue in a worker process. It claims again only when a claim may find
 * rows: after a wake (this process accepted work, leases came back), after a claim that came back
 * full, when a row falls due, when something the last claim left out has room again, after the
 * poll interval, and
 * where the store can tell cheaply (SQLite's data_version), when another process committed. A
 * claim repeated at every freed lane would cost a write statement per job, and one that leaves
 * projects out reads past all of their due rows. Where the store cannot tell of other commits
 * (PostgreSQL), a claim that leaves nothing out, an index look-up of due rows, follows each freed
 * lane, so work another process committed is found at once.
 */
export class QueueLoop {
  private stopping = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private wokenMeanwhile = false;
  private mayFindMore = true;
  /** Counts wakes, so a wake that lands while a claim runs is not lost when it ends. */
  private wakes = 0;
  private nextClaimAt = 0;
  /** `storage.otherCommits()` as the last claim began or the last look saw it. */
  private commitsSeen: number | undefined;
  private lookedAt = 0;
  private dueLookedAt = 0;
  /** When the last claim began: it saw every row due by then that it could take. */
  private claimBeganAt = 0;
  /** `wakes` and the time when the consumer last answered its requests. */
  private wakesAnswered = -1;
  private answeredAt = 0;

  constructor(
    private readonly storage: Storage,
    private readonly queue: Queue,
    private readonly consumer: Consumer,
    private readonly options: LoopOptions,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.claimTrouble = new Trouble(logger, 'claiming', 'error', { queue: queue.table });
  }

  private readonly claimTrouble: Trouble;

  start(): void {
    if (this.loop !== null) return;
    this.stopping = false;
    this.loop = this.run().catch((err: unknown) =>
      this.logger.error({ err, queue: this.queue.table }, 'queue loop crashed'),
    );
  }

  /** New work may be due now (accepted in this process, returned to the queue). */
  wake(): void {
    this.mayFindMore = true;
    this.wakes++;
    this.resume();
  }

  /** Room came free in the consumer: dispatch more, claiming only where a claim may help. */
  resume(): void {
    if (this.wakeUp === null) this.wokenMeanwhile = true;
    else this.wakeUp();
  }

  /** Stops claiming, then lets the consumer finish (bounded) and give back what it did not start. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
    this.loop = null;
    await this.consumer.drain(this.now() + this.options.stopTimeoutMs);
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      this.lookElsewhere();
      await this.answerRequests();
      let claimed = 0;
      if (
        this.consumer.hasRoom() &&
        (this.mayFindMore || this.now() >= this.nextClaimAt || this.consumer.roomReturned?.() === true)
      ) {
        const wakes = this.wakes;
        // Read before the claim's snapshot: a commit elsewhere after this moves it again.
        this.commitsSeen = this.storage.otherCommits?.();
        this.claimBeganAt = this.now();
        try {
          const fill = await this.consumer.fill();
          claimed = fill.claimed;
          // Work accepted while the claim ran may have committed after the claim's snapshot.
          this.mayFindMore =
            fill.full || this.wakes !== wakes || (!fill.filtered && this.storage.otherCommits === undefined);
        } catch (err) {
          this.claimTrouble.failed(err);
          await this.sleep(this.options.pollMs);
          continue;
        }
        this.claimTrouble.succeeded();
        this.nextClaimAt = this.now() + this.options.pollMs;
      }
      if (this.stopping) break;
      if (claimed === 0 || !this.consumer.hasRoom()) await this.sleep(await this.delay());
    }
  }

  /**
   * Lets the consumer answer what waits on it after each wake (a cancel wakes the loop as an
   * accept does) and at least once per poll, in case the wake went to another process.
   */
  private async answerRequests(): Promise<void> {
    if (this.consumer.answerRequests === undefined) return;
    const now = this.now();
    if (this.wakes === this.wakesAnswered && now - this.answeredAt < this.options.pollMs) return;
    this.wakesAnswered = this.wakes;
    this.answeredAt = now;
    try {
      await this.consumer.answerRequests();
    } catch (err) {
      this.logger.error(
        { err, queue: this.queue.table },
        'answering requests failed; retrying at the next wake',
      );
    }
  }

  /**
   * How long to sleep: until the poll, or until a ready row falls due by time (a scheduled send, a
   * retry), which is then claimed at its time. While work is in flight such a row may be written
   * at any moment (by another worker, another process), so the look-up is repeated every
   * DUE_LOOK_MS; a wake or freed room ends the sleep before that.
   */
  private async delay(): Promise<number> {
    // Nothing can be claimed without room; the consumer resumes the loop when room comes free.
    if (!this.consumer.hasRoom()) return this.options.pollMs;
    const now = this.now();
    const busy = this.consumer.busy();
    if (!busy || now - this.dueLookedAt >= DUE_LOOK_MS || now < this.dueLookedAt) {
      this.dueLookedAt = now;
      try {
        // Rows that fell due since the last claim began are looked for too: that claim may have
        // run a moment before one was due (a timer fires by the loop's cached clock, which can
        // be behind Date.now()), and it is then claimed at once instead of at the poll.
        const next = await nextDueAt(this.storage.db, this.queue, Math.min(now, this.claimBeganAt));
        if (next !== null) this.nextClaimAt = Math.min(this.nextClaimAt, next);
      } catch {
        // The next claim reports database trouble.
      }
    }
    const claimable = this.consumer.claimableAt?.() ?? null;
    if (claimable !== null) this.nextClaimAt = Math.min(this.nextClaimAt, claimable);
    const untilClaim = Math.max(0, this.nextClaimAt - this.now());
    return Math.min(this.options.pollMs, untilClaim, busy ? DUE_LOOK_MS : Infinity);
  }

  /**
   * Looks, at most once per WATCH_MS, whether another connection committed since the last claim
   * began or the last look; one that did wakes the loop as an accept in this process would.
   */
  private lookElsewhere(): void {
    if (this.storage.otherCommits === undefined) return;
    const now = this.now();
    if (now - this.lookedAt < WATCH_MS) return;
    this.lookedAt = now;
    let commits: number;
    try {
      commits = this.storage.otherCommits();
    } catch {
      // The next claim reports database trouble.
      return;
    }
    if (commits === this.commitsSeen) return;
    this.commitsSeen = commits;
    this.wake();
  }

  private sleep(ms: number): Promise<void> {
    // Woken while the loop was busy (a claim, the due look-up): there may be work already.
    if (this.wokenMeanwhile) {
      this.wokenMeanwhile = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (watch !== null) clearInterval(watch);
        // Also when the timer ended it: a wake that comes while the loop is busy must be kept
        // for the next sleep (wokenMeanwhile), not spent on this one.
        if (this.wakeUp === done) this.wakeUp = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      // Another process (an api role) commits work without a wake reaching this one: where the
      // store can tell cheaply, look every few milliseconds instead of waiting for the poll.
      const watch =
        this.storage.otherCommits === undefined ? null : setInterval(() => this.lookElsewhere(), WATCH_MS);
      this.wakeUp = done;
    });
  }
}
