import type { Logger } from 'pino';
import { Trouble } from '../logger.js';
import { HEARTBEAT_MS, LivenessJudge } from '../domain/liveness.js';
import { reclaimExpiredLeases } from '../storage/queue.js';
import type { Storage } from '../storage/storage.js';
import { beat, listHeartbeats, reclaimFromDeadWorkers, removeWorker } from '../storage/workers.js';

/**
 * A worker process's heartbeat, and the reclaim pass that runs with it for every queue. Every
 * HEARTBEAT_MS the worker moves its own heartbeat, then returns to their queues (due at once) the
 * rows of workers whose heartbeat stopped moving, and, every quarter of a lease, the rows whose
 * lease ran out while their owner has no heartbeat (one that died before heartbeats existed). So
 * after a kill -9 in-flight work waits seconds, not a whole lease; a live worker never loses its
 * leases to a pause shorter than the stale time.
 *
 * The pass runs on its own timer rather than in a claim loop: a worker whose lanes are all busy
 * stops claiming, but must still beat and still rescue a dead peer's work.
 */
export class Heartbeat {
  private judge = new LivenessJudge();
  private timer: NodeJS.Timeout | null = null;
  private tick: Promise<void> | null = null;
  private nextLeaseCheckAt = 0;

  constructor(
    private readonly storage: Storage,
    private readonly owner: string,
    private readonly logger: Logger,
    /**
     * How often expired leases are looked for: a lease is long (minutes), so a quarter of it is
     * soon enough, and the write stays off the worker's busy seconds. Dead workers are looked for
     * at every beat.
     */
    private readonly leaseCheckMs: number,
    /** Told when rows went back to their queues, so the loops claim them without waiting. */
    private readonly onReclaimed: () => void,
    private readonly now: () => number = Date.now,
  ) {
    this.trouble = new Trouble(logger, 'heartbeat');
  }

  private readonly trouble: Trouble;

  /** Writes the first heartbeat, so this worker is known before it claims anything. */
  async start(): Promise<void> {
    const now = this.now();
    await beat(this.storage.db, this.owner, now);
    // The first look at the others starts their clocks: a peer killed before this process started
    // is judged STALE_AFTER_MS from now, not from the first tick.
    this.judge.observe(await listHeartbeats(this.storage.db), now);
    this.timer = setInterval(() => {
      this.tick ??= this.pass().finally(() => (this.tick = null));
    }, HEARTBEAT_MS);
  }

  private async pass(): Promise<void> {
    const { db } = this.storage;
    try {
      const now = this.now();
      try {
        await beat(db, this.owner, now);
      } catch (err) {
        // While this worker cannot write its own heartbeat (a full disk, a lost database), its
        // peers most likely cannot either: the time must not count against them, or each would
        // judge the others dead the moment the store is back and send their mail a second time.
        // Their clocks start again at the first beat that succeeds.
        this.judge = new LivenessJudge();
        throw err;
      }
      const dead = this.judge
        .observe(await listHeartbeats(db), now)
        .filter((worker) => worker.owner !== this.owner);
      const fromDead = await reclaimFromDeadWorkers(db, dead, now);
      let expired = 0;
      if (now >= this.nextLeaseCheckAt) {
        expired = await reclaimExpiredLeases(db, now);
        this.nextLeaseCheckAt = now + this.leaseCheckMs;
      }
      if (fromDead > 0 || dead.length > 0)
        this.logger.warn(
          { workers: dead.map((worker) => worker.owner), reclaimed: fromDead },
          'returned the work of stopped workers to the queue',
        );
      if (expired > 0)
        this.logger.warn({ reclaimed: expired }, 'returned work with expired leases to the queue');
      if (fromDead + expired > 0) this.onReclaimed();
      this.trouble.succeeded();
    } catch (err) {
      this.trouble.failed(err);
    }
  }

  /**
   * Stops beating. A worker that still holds leases (work that outlived the stop timeout, or
   * outcomes the store refused) leaves its heartbeat to go stale, so another worker takes that work
   * back within seconds; one that holds nothing removes its row.
   */
  async stop(holdsLeases: boolean): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.tick;
    if (holdsLeases) return;
    try {
      await removeWorker(this.storage.db, this.owner);
    } catch (err) {
      this.logger.warn({ err }, 'removing the worker heartbeat failed');
    }
  }
}
