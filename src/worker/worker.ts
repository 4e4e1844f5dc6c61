import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { nextDueAt, releaseClaims } from '../storage/notifications.js';
import type { NotificationRow } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';
import { lanePolicy, mayUseLane, type LanePolicy } from '../domain/lanes.js';
import { windowPolicy } from '../domain/relay-window.js';
import type { AttemptResult, Deliverer } from './deliver.js';
import { Heartbeat } from './heartbeat.js';
import { suppressedMessage, suppressionKey, type SuppressionReason } from '../domain/suppression.js';
import { suppressedAmong } from '../storage/suppressions.js';
import type { BatchLoader, DeliveryContext, DeliveryLoader } from './loader.js';
import { OutcomeRecorder, type DeliveryOutcome, type StoredOutcome } from './outcomes.js';
import { RelayWindows } from './relay-windows.js';

/** The delivery settings the worker loop uses (documented in config.ts). */
export type WorkerOptions = Pick<
  Config['delivery'],
  | 'maxAttempts'
  | 'retryBaseMs'
  | 'leaseMs'
  | 'batchSize'
  | 'pollMs'
  | 'concurrency'
  | 'stopTimeoutMs'
  | 'smtpMaxConnections'
  | 'smtpTimeoutMs'
>;

interface Job {
  readonly row: NotificationRow;
  readonly batch: BatchLoader;
  /** Why the recipient is on the project's suppression list; null when it is not. */
  readonly suppressed: SuppressionReason | null;
}

/** How often a worker, asleep or busy, looks for other processes' commits (SQLite's data_version). */
const WATCH_MS = 10;

/** How often a worker with busy lanes looks for rows falling due by time (see busyDelay). */
const DUE_LOOK_MS = 100;

export class DeliveryWorker {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly backlog: Job[] = [];
  /** Lanes in use per relay (host and port, from Deliverer.relayOf). */
  private readonly relayBusy = new Map<string, number>();
  /** Loaded jobs waiting for a lane of their own relay (it holds its share, or the reserve is left). */
  private readonly parked = new Map<string, { job: Job; context: DeliveryContext }[]>();
  /** Jobs loaded after a stop began (or whose dispatch failed): released with the backlog. */
  private readonly releasedAtStop: Job[] = [];
  private readonly lanes: LanePolicy;
  /** Per relay: how many transactions it may have in flight, learned from its answers. */
  private readonly windows: RelayWindows;
  /** Ids this worker holds a lease on: claimed and waiting, or being sent. */
  private readonly held = new Set<number>();
  private active = 0;
  /** Attempts whose outcome is not committed yet. */
  private readonly recording = new Set<Promise<void>>();
  private stopping = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private wokenMeanwhile = false;
  /**
   * Whether a claim may find rows now. A claim that found fewer rows than it asked for is
   * repeated only after new work is accepted in this process (a wake), another connection
   * committed (where the store can tell: `otherCommits`), a left-out project has room again, a
   * row falls due, or a poll interval passes: repeated at each freed lane, it cost a write
   * statement per message (and one that leaves projects out whose relay is at its window reads
   * past every due row of theirs). Where the store cannot tell of other commits (PostgreSQL), a
   * claim that leaves nothing out, an index look-up of due rows, runs whenever a lane frees, so
   * work another process accepted is found at once.
   */
  private mayFindMore = true;
  /** `storage.otherCommits()` as the last claim began or the last look saw it. */
  private commitsSeen: number | undefined;
  /** When `lookElsewhere` last read `otherCommits`. */
  private lookedAt = 0;
  /** When `busyDelay` last looked up the next due time. */
  private dueLookedAt = 0;
  /** Counts wake() calls, so a wake that lands while a claim runs is not lost when it ends. */
  private wakes = 0;
  private nextClaimAt = 0;
  private leftOut = new Set<number>();
  private renewTimer: NodeJS.Timeout | null = null;
  private readonly heartbeat: Heartbeat;
  private readonly outcomes: OutcomeRecorder;
  /** Told about every stored outcome (metrics); must not throw or block. */
  onOutcome: ((outcome: DeliveryOutcome) => void) | null = null;

  constructor(
    private readonly storage: Storage,
    private readonly loader: DeliveryLoader,
    private readonly deliverer: Deliverer,
    private readonly options: WorkerOptions,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.lanes = lanePolicy(options);
    this.windows = new RelayWindows(windowPolicy(options), logger);
    this.heartbeat = new Heartbeat(
      storage,
      this.owner,
      logger,
      Math.max(250, Math.floor(options.leaseMs / 4)),
      () => this.wake(),
      now,
    );
    this.outcomes = new OutcomeRecorder(storage.db, {
      owner: this.owner,
      maxAttempts: options.maxAttempts,
      retryBaseMs: options.retryBaseMs,
      now,
      onLeaseLost: (row) =>
        this.logger.warn({ requestId: row.request_id }, 'lease lost before the outcome was recorded'),
      onStored: (stored) => this.stored(stored),
    });
  }

  start(): void {
    if (this.loop !== null) return;
    this.stopping = false;
    this.renewTimer = setInterval(
      () => void this.renew(),
      Math.max(100, Math.floor(this.options.leaseMs / 3)),
    );
    this.loop = this.beatThenRun().catch((err: unknown) =>
      this.logger.error({ err }, 'delivery loop crashed'),
    );
  }

  /** New work may be due now (the in-process API just accepted something, leases came back). */
  wake(): void {
    this.mayFindMore = true;
    this.wakes++;
    this.resume();
  }

  /** A lane came free or a job was parked: dispatch more, without a claim unless one may help. */
  private resume(): void {
    if (this.wakeUp === null) this.wokenMeanwhile = true;
    else this.wakeUp();
  }

  /** The first heartbeat is written before the first claim: a worker is never unknown to its peers. */
  private async beatThenRun(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.heartbeat.start();
        break;
      } catch (err) {
        this.logger.error({ err }, 'writing the first worker heartbeat failed; retrying');
        await this.sleep(this.options.pollMs);
      }
    }
    await this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let claimed = 0;
      this.lookElsewhere();
      const leaveOut = this.saturatedProjects();
      // Refill before the backlog runs dry, so the lanes never wait for a claim.
      if (
        this.backlog.length < Math.max(this.options.concurrency, this.options.batchSize / 2) &&
        (this.mayFindMore ||
          this.now() >= this.nextClaimAt ||
          [...this.leftOut].some((project) => !leaveOut.includes(project)))
      ) {
        try {
          claimed = await this.claim(leaveOut);
        } catch (err) {
          this.logger.error({ err }, 'claiming due notifications failed; retrying');
          await this.sleep(this.options.pollMs);
          continue;
        }
      }
      if (this.stopping) break;
      while (this.active < this.options.concurrency && this.backlog.length > 0)
        this.dispatch(this.backlog.shift()!);
      if (claimed === 0 || this.active >= this.options.concurrency) {
        await this.sleep(
          claimed === 0 && this.active === 0 ? await this.idleDelay() : await this.busyDelay(),
        );
      }
    }
  }

  /**
   * Looks, at most once per WATCH_MS, whether another connection committed since the last claim
   * began or the last look; one that did wakes the loop like an accept in this process would.
   * Called by the sleeping loop's watch and at each turn of the loop, so such work is found within
   * WATCH_MS whether lanes are busy or not.
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

  private async claim(leaveOut: number[]): Promise<number> {
    const now = this.now();
    const wakes = this.wakes;
    // Read before the claim's snapshot: a commit elsewhere after this moves it again.
    this.commitsSeen = this.storage.otherCommits?.();
    const rows = await this.storage.claimDue({
      now,
      owner: this.owner,
      leaseUntil: now + this.options.leaseMs,
      limit: this.options.batchSize,
      excludeProjects: leaveOut,
    });
    // Work accepted while the claim ran may have committed after the claim's snapshot.
    this.mayFindMore =
      rows.length >= this.options.batchSize ||
      this.wakes !== wakes ||
      (leaveOut.length === 0 && this.storage.otherCommits === undefined);
    this.nextClaimAt = now + this.options.pollMs;
    this.leftOut = new Set(leaveOut);
    if (rows.length === 0) return 0;
    for (const row of rows) this.held.add(row.id);
    const batch = this.loader.batch();
    // One query for the whole batch. If it fails the claim is given back, not left leased.
    const keys = rows.map((row) => suppressionKey(row.recipient));
    let suppressed: Map<string, SuppressionReason>;
    try {
      suppressed = await suppressedAmong(
        this.storage.db,
        rows.flatMap((row, i) => (keys[i] === null ? [] : [{ projectId: row.project_id, email: keys[i]! }])),
      );
    } catch (error) {
      for (const row of rows) this.held.delete(row.id);
      await releaseClaims(
        this.storage.db,
        rows.map((row) => row.id),
        this.owner,
        this.now(),
      ).catch(() => {});
      throw error;
    }
    rows.forEach((row, i) => {
      const reason = keys[i] === null ? undefined : suppressed.get(`${row.project_id}\n${keys[i]}`);
      this.backlog.push({ row, batch, suppressed: reason ?? null });
    });
    return rows.length;
  }

  /**
   * Projects not to claim for now: those with mail parked behind a relay that has a whole share
   * of mail parked already. Their relay has work for when it has room; the backlog is left to
   * other relays' mail, and nothing more of theirs is leased away from other workers.
   */
  private saturatedProjects(): number[] {
    const projects = new Set<number>();
    for (const [relay, waiting] of this.parked) {
      if (waiting.length < this.relayLimit(relay)) continue;
      for (const { job } of waiting) projects.add(job.row.project_id);
    }
    return [...projects];
  }

  /** Takes a lane for a claimed job: loads its context, then sends, or parks it behind its relay. */
  private dispatch(job: Job): void {
    this.active++;
    if (job.suppressed !== null) {
      // Fails without rendering or any SMTP transaction (product.md §5).
      const failure = {
        kind: 'permanent' as const,
        message: suppressedMessage(job.suppressed),
        smtpCode: null,
      };
      this.attempt(job, null, () =>
        Promise.resolve({ ok: false, failure, transport: null, rendered: null, messageId: null }),
      );
      return;
    }
    const loaded = (context: DeliveryContext | null) => {
      if (this.stopping) {
        // Loaded after the stop began: released with the backlog, never started.
        this.active--;
        this.releasedAtStop.push(job);
        return;
      }
      const relay = context === null ? null : this.deliverer.relayOf(context);
      if (
        context !== null &&
        relay !== null &&
        !mayUseLane(this.lanes, this.relayBusy.get(relay) ?? 0, this.active, this.relayLimit(relay))
      ) {
        // The relay holds its window, or only the reserved lanes are left: give the lane back.
        this.active--;
        this.park(relay, { job, context });
        this.resume();
        return;
      }
      this.attempt(job, relay === null || context === null ? null : { relay, context }, () =>
        this.deliverer.attempt(job.row, context),
      );
    };
    const loading = job.batch
      .load(job.row.project_id, job.row.template)
      .then(loaded, (err: unknown) => this.attempt(job, null, () => Promise.reject(err)))
      .catch((err: unknown) => {
        // Nothing above throws today; if it ever does, the lane and the lease must not leak.
        this.logger.error({ err, requestId: job.row.request_id }, 'dispatching a delivery failed');
        this.active--;
        this.releasedAtStop.push(job);
      });
    this.track(loading);
  }

  private park(relay: string, entry: { job: Job; context: DeliveryContext }, first = false): void {
    let waiting = this.parked.get(relay);
    if (waiting === undefined) this.parked.set(relay, (waiting = []));
    if (first) waiting.unshift(entry);
    else waiting.push(entry);
  }

  private unpark(relay: string): { job: Job; context: DeliveryContext } | undefined {
    const waiting = this.parked.get(relay);
    const next = waiting?.shift();
    if (waiting?.length === 0) this.parked.delete(relay);
    return next;
  }

  /** Transactions the relay may have in flight now: its window, within its share of the lanes. */
  private relayLimit(relay: string): number {
    return Math.min(this.lanes.perRelay, this.windows.size(relay));
  }

  /** The window each relay this worker has sent to has now (metrics, tests). */
  relayWindows(): Map<string, number> {
    return this.windows.sizes();
  }

  /**
   * A relay that refused a connection while it was serving others of ours has no room for more
   * just now: its window has shrunk, and the message waits for a lane of that relay instead of
   * counting a failed attempt (nothing was sent). Alone in flight, the refusal is recorded.
   */
  private refusedForRoom(relay: string, result: AttemptResult): boolean {
    return (
      !result.ok &&
      result.transport === 'smtp' &&
      result.failure.kind === 'transient' &&
      result.failure.command === 'CONN' &&
      (this.relayBusy.get(relay) ?? 0) > 1
    );
  }

  /**
   * One attempt in a lane (already counted in `active`); the outcome is recorded after it. `lane`
   * names the relay the attempt goes to and what it needs to wait for a lane there again.
   */
  private attempt(
    job: Job,
    lane: { relay: string; context: DeliveryContext } | null,
    send: () => Promise<AttemptResult>,
  ): void {
    const relay = lane?.relay ?? null;
    if (relay !== null) this.relayBusy.set(relay, (this.relayBusy.get(relay) ?? 0) + 1);
    const startedAt = this.now();
    const round = relay === null ? 0 : this.windows.round(relay);
    let waitsAgain = false;
    const recorded = send()
      .catch((err: unknown): AttemptResult => {
        this.logger.error({ err, requestId: job.row.request_id }, 'delivery attempt crashed');
        const message = err instanceof Error ? err.message : String(err);
        return {
          ok: false,
          failure: { kind: 'transient', message, smtpCode: null },
          transport: null,
          rendered: null,
          messageId: null,
        };
      })
      .then((result) => {
        // The lane is free as soon as the relay has answered: the outcome is committed with the
        // next group, so SMTP concurrency does not wait on the database's sync. The lease is
        // held (and renewed) until the outcome is stored.
        this.active--;
        if (lane !== null) {
          const inFlight = this.relayBusy.get(lane.relay) ?? 1;
          this.windows.learn(lane.relay, { round, inFlight, durationMs: this.now() - startedAt }, result);
          // Still leased and held: it goes first when the relay has room again.
          waitsAgain = this.refusedForRoom(lane.relay, result);
          if (waitsAgain) this.park(lane.relay, { job, context: lane.context }, true);
          this.releaseRelay(lane.relay);
        }
        this.resume();
        if (waitsAgain) return;
        return this.outcomes.record({ row: job.row, startedAt, result });
      })
      .catch((err: unknown) => {
        // The outcome could not be stored; the lease will expire and the message be retried.
        this.logger.error({ err, requestId: job.row.request_id }, 'recording a delivery outcome failed');
      })
      .finally(() => {
        if (!waitsAgain) this.held.delete(job.row.id);
      });
    this.track(recorded);
  }

  /**
   * A relay's lane came free: the jobs parked behind that relay take it at once, and as many more
   * lanes as its window has grown by.
   */
  private releaseRelay(relay: string): void {
    const busy = (this.relayBusy.get(relay) ?? 1) - 1;
    if (busy === 0) this.relayBusy.delete(relay);
    else this.relayBusy.set(relay, busy);
    while (
      !this.stopping &&
      this.active < this.options.concurrency &&
      mayUseLane(this.lanes, this.relayBusy.get(relay) ?? 0, this.active + 1, this.relayLimit(relay))
    ) {
      const next = this.unpark(relay);
      if (next === undefined) return;
      this.active++;
      this.attempt(next.job, { relay, context: next.context }, () =>
        this.deliverer.attempt(next.job.row, next.context),
      );
    }
  }

  private track(work: Promise<void>): void {
    this.recording.add(work);
    void work.finally(() => this.recording.delete(work));
  }

  private stored({ row, result, outcome, durationMs }: StoredOutcome): void {
    if (!result.ok) {
      this.logger.warn(
        {
          projectId: row.project_id,
          requestId: row.request_id,
          attempt: row.attempts,
          smtpCode: result.failure.smtpCode,
          reply: result.failure.message,
        },
        outcome === 'retry' ? 'delivery failed; will retry' : 'delivery failed permanently',
      );
    }
    this.onOutcome?.({ projectId: row.project_id, outcome, transport: result.transport, durationMs });
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0) return;
    try {
      await this.storage.renewLeases({
        ids: [...this.held],
        owner: this.owner,
        leaseUntil: this.now() + this.options.leaseMs,
      });
    } catch (err) {
      this.logger.warn({ err }, 'renewing leases failed');
    }
  }

  /**
   * How long a loop with busy lanes sleeps: until the poll, or until a queued row falls due by
   * time (a scheduled send, a retry), which is then claimed at its time. Such a row may be written
   * at any moment (by another worker, another process), so the look-up is repeated every
   * DUE_LOOK_MS while the lanes stay busy; a freed lane wakes the loop before that.
   */
  private async busyDelay(): Promise<number> {
    const now = this.now();
    if (now - this.dueLookedAt >= DUE_LOOK_MS || now < this.dueLookedAt) {
      this.dueLookedAt = now;
      try {
        const next = await nextDueAt(this.storage.db, now);
        if (next !== null) this.nextClaimAt = Math.min(this.nextClaimAt, next);
      } catch {
        // The next claim reports database trouble.
      }
    }
    return Math.max(0, Math.min(this.options.pollMs, DUE_LOOK_MS, this.nextClaimAt - this.now()));
  }

  private async idleDelay(): Promise<number> {
    try {
      const next = await nextDueAt(this.storage.db);
      if (next !== null) {
        // A row falls due then (a scheduled send, a retry): the next claim comes no later.
        this.nextClaimAt = Math.min(this.nextClaimAt, next);
        return Math.min(this.options.pollMs, Math.max(0, next - this.now()));
      }
    } catch {
      // The next claim reports database trouble.
    }
    return this.options.pollMs;
  }

  private sleep(ms: number): Promise<void> {
    // Woken while the loop was busy (a claim, the idle look-up): there may be work already.
    if (this.wokenMeanwhile) {
      this.wokenMeanwhile = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      // Another process (an api role) commits work without a wake reaching this one: where the
      // store can tell cheaply, look every few milliseconds instead of waiting for the poll.
      const watch =
        this.storage.otherCommits === undefined ? null : setInterval(() => this.lookElsewhere(), WATCH_MS);
      function done() {
        clearTimeout(timer);
        if (watch !== null) clearInterval(watch);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = null;
        done();
      };
    });
  }

  /**
   * Stops claiming, waits (bounded) for SMTP transactions in flight to finish and be recorded, and
   * releases claimed messages that were not started, so the next worker takes them at once.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
    this.loop = null;
    const waiting = this.backlog.splice(0);
    const deadline = this.now() + this.options.stopTimeoutMs;
    while (this.recording.size > 0 && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    // Parked only now: a job still loading when the stop began may have parked since.
    for (const relay of [...this.parked.keys()]) {
      for (let next = this.unpark(relay); next !== undefined; next = this.unpark(relay))
        waiting.push(next.job);
    }
    waiting.push(...this.releasedAtStop.splice(0));
    await this.outcomes.flush();
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    const ids = waiting.map((job) => job.row.id);
    for (const id of ids) this.held.delete(id);
    try {
      await releaseClaims(this.storage.db, ids, this.owner, this.now());
    } catch (err) {
      this.logger.warn({ err }, 'releasing claimed messages failed; their leases will expire');
    }
    await this.heartbeat.stop(this.held.size > 0);
    if (this.active > 0)
      this.logger.warn({ inFlight: this.active }, 'stopped with SMTP transactions still in flight');
  }
}
