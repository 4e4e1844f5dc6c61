import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { failedBeforeSending, type AttemptResult } from '../domain/attempt.js';
import { deliveryBackoff } from '../domain/backoff.js';
import { lanePolicy, type LanePolicy } from '../domain/lanes.js';
import {
  relayHealthPolicy,
  routeAttempt,
  type AttemptRoute,
  type RelayRole,
} from '../domain/relay-health.js';
import { windowPolicy } from '../domain/relay-window.js';
import { suppressedMessage, type SuppressionReason } from '../domain/suppression.js';
import type { LeaseQueue } from '../queue/lease-queue.js';
import type { Consumer, Fill } from '../queue/loop.js';
import type { NotificationRow } from '../storage/schema.js';
import { ClaimedCancels } from './claimed-cancels.js';
import { DeletedProjects } from './deleted-projects.js';
import type { Deliverer, Relay, Relays } from './deliver.js';
import { LOADED_FOR_MS, type BatchLoader, type DeliveryContext, type DeliveryLoader } from './loader.js';
import type { Attempted } from './outcomes.js';
import { AttemptRecorder } from './attempt-recorder.js';
import { RelayHealthBook } from './relay-health.js';
import { RelayLanes } from './relay-lanes.js';
import { suppressionsOf } from './suppressed.js';

/** The delivery settings the mail lanes use (documented in config.ts). */
export type MailOptions = Pick<
  Config['delivery'],
  'maxAttempts' | 'retryBaseMs' | 'batchSize' | 'concurrency' | 'smtpMaxConnections' | 'smtpTimeoutMs'
>;

interface Job {
  readonly row: NotificationRow;
  readonly batch: BatchLoader;
  /** Why the recipient is on the project's suppression list; null when it is not. */
  readonly suppressed: SuppressionReason | null;
}

/** A loaded job with the relays it may go to; it waits parked for a lane of one of them. */
interface Routed {
  readonly job: Job;
  readonly context: DeliveryContext;
  readonly relays: Relays;
  /** When its context was loaded: mail parked longer loads it again before it goes (startParked). */
  readonly loadedAt: number;
}

/** An attempt's way to its relay: the lane it holds there, and what it needs to wait for one again. */
interface Lane {
  readonly relay: Relay;
  readonly role: RelayRole;
  readonly routed: Routed;
}

/**
 * Mail delivery as a consumer of the notification queue. Claimed rows wait in a backlog and run
 * in lanes, at most `concurrency` SMTP transactions at once, each relay at most its window of them
 * (relay-lanes.ts); a message whose relay has no room waits parked without a lane, while its
 * project is left out of claims. Each attempt's outcome is decided by the lifecycle
 * (domain/lifecycle.ts) and stored through the lease queue.
 */
export class MailConsumer implements Consumer {
  private readonly backlog: Job[] = [];
  private readonly relays: RelayLanes<Routed>;
  /** What this worker knows of its relays, shared with every other worker (relay-health.ts). */
  readonly health: RelayHealthBook;
  /** Stores each attempt's outcome, and tells the metrics (attempt-recorder.ts). */
  readonly outcomes: AttemptRecorder;
  private readonly lanes: LanePolicy;
  private active = 0;
  /**
   * Attempts whose outcome is not stored yet. A lane is free once its relay answered, but no mail
   * starts while `concurrency` outcomes or more wait for the store; with at most `concurrency`
   * transactions in flight, a crash (or a store that refuses writes) leaves fewer than twice
   * `concurrency` messages sent and not recorded, the ones sent again after it.
   */
  private recording = 0;
  /** Jobs loaded after a stop began: given back with the backlog. */
  private readonly unstarted: Job[] = [];
  private readonly running = new Set<Promise<void>>();
  /** Answers cancels of the mail this worker holds. */
  private readonly cancels: ClaimedCancels<Job>;
  /** The projects this worker holds mail of that were deleted since (a delete with force). */
  private readonly deletedProjects: DeletedProjects;
  private leftOut = new Set<number>();
  private stopping = false;
  /** Told when lanes came free (the loop may claim more). */
  onRoom: () => void = () => {};
  /** Told when mail that waited for a relay is due now (the loop should claim). */
  onDue: () => void = () => {};
  /** Told once a cancel this worker answered has queued webhook deliveries. */
  onWebhooksQueued: () => void = () => {};

  constructor(
    private readonly queue: LeaseQueue<'notifications', Attempted>,
    private readonly loader: DeliveryLoader,
    private readonly deliverer: Deliverer,
    private readonly options: MailOptions,
    private readonly logger: Logger,
    /** Moves whenever a project may have been deleted; undefined where that cannot be told. */
    projectChanges: (() => string) | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.deletedProjects = new DeletedProjects(queue.db, projectChanges, logger);
    this.lanes = lanePolicy(options);
    this.relays = new RelayLanes(
      this.lanes,
      windowPolicy(options),
      logger,
      (parked: Routed) => parked.job.row.project_id,
    );
    this.outcomes = new AttemptRecorder(
      queue,
      { maxAttempts: options.maxAttempts, backoff: deliveryBackoff(options.retryBaseMs) },
      logger,
      now,
    );
    this.health = new RelayHealthBook(
      queue.db,
      deliverer.mailer,
      queue.owner,
      { policy: relayHealthPolicy(options), probeTimeoutMs: options.smtpTimeoutMs },
      logger,
      now,
    );
    this.health.onChange = (relay, down) => this.relayChanged(relay, down);
    this.cancels = new ClaimedCancels(queue, logger, now);
    this.cancels.onWebhooksQueued = () => this.onWebhooksQueued();
  }

  /** Refills before the backlog runs dry, so the lanes never wait for a claim. */
  hasRoom(): boolean {
    return this.backlog.length < Math.max(this.options.concurrency, this.options.batchSize / 2);
  }

  busy(): boolean {
    return this.active > 0;
  }

  roomReturned(): boolean {
    if (this.leftOut.size === 0) return false;
    const leaveOut = this.relays.saturatedProjects();
    for (const project of this.leftOut) if (!leaveOut.has(project)) return true;
    return false;
  }

  /** The window each relay this worker has sent to has now (metrics, tests). */
  relayWindows(): Map<string, number> {
    return this.relays.windowSizes();
  }

  /** Claims due mail, reads whose recipients are suppressed (one query), and starts what fits. */
  async fill(): Promise<Fill> {
    await this.health.start();
    // Projects with mail parked behind a relay that has a whole window of mail parked already:
    // their relay has work for when it has room; the backlog is left to other relays' mail, and
    // nothing more of theirs is leased away from other workers.
    const leaveOut = this.relays.saturatedProjects();
    const { rows, extra: suppressed } = await this.queue.claimAndRead(
      { limit: this.options.batchSize, excludeProjects: [...leaveOut] },
      (claimed) => (claimed.length === 0 ? Promise.resolve(null) : suppressionsOf(this.queue.db, claimed)),
    );
    this.leftOut = leaveOut;
    if (suppressed !== null) {
      const batch = this.loader.batch();
      for (const row of rows) this.backlog.push({ row, batch, suppressed: suppressed.get(row.id) ?? null });
    }
    this.pump();
    return {
      claimed: rows.length,
      full: rows.length >= this.options.batchSize,
      filtered: leaveOut.size > 0,
    };
  }

  /**
   * Answers the cancels waiting for this worker (claimed-cancels.ts). The mail asked about is taken
   * out of the backlog and the parked before the first wait, so that no lane starts it meanwhile.
   */
  async answerRequests(): Promise<void> {
    if (this.stopping || this.queue.holding === 0) return;
    await this.dropMailOfDeletedProjects();
    if (this.stopping) return;
    const asked = await this.cancels.asked();
    if (asked === null || this.stopping) return;
    const waiting = this.takeWaiting((job) => asked.about(job));
    const answering = this.cancels.answer(asked, waiting).then((back) => this.goOn(back));
    this.track(answering);
    await answering;
  }

  /**
   * A project deleted with its mail still queued (`force`) takes that mail with it: what this
   * worker claimed of it and has not begun (the backlog, the parked, and the lanes still loading,
   * checked as they start) is let go, never sent. Its rows went with the project; a transaction
   * already begun goes on.
   */
  private async dropMailOfDeletedProjects(): Promise<void> {
    const held = this.relays.parkedProjectIds();
    for (const job of [...this.backlog, ...this.cancels.loadingJobs]) held.add(job.row.project_id);
    if (!(await this.deletedProjects.look(held))) return;
    await this.dropped(this.takeWaiting((job) => this.ofDeletedProject(job)));
  }

  /** Takes the jobs `which` picks out of the backlog and the parked: none of them starts after this. */
  private takeWaiting(which: (job: Job) => boolean): Job[] {
    const taken = this.backlog.filter(which);
    if (taken.length > 0)
      this.backlog.splice(0, this.backlog.length, ...this.backlog.filter((job) => !which(job)));
    for (const parked of this.relays.unparkWhere((entry) => which(entry.job))) taken.push(parked.job);
    return taken;
  }

  private ofDeletedProject(job: Job): boolean {
    return this.deletedProjects.has(job.row.project_id);
  }

  /** Lets go of a job of a deleted project that holds a lane: the lane is given back, never begun. */
  private dropFromLane(job: Job): void {
    this.active--;
    this.track(this.dropped([job]));
  }

  /** Lets go of claimed mail of deleted projects, never begun. */
  private async dropped(jobs: readonly Job[]): Promise<void> {
    if (jobs.length === 0) return;
    this.logger.info({ messages: jobs.length }, 'mail of a deleted project dropped before it was sent');
    await this.queue.release(jobs.map((job) => job.row));
    this.onRoom();
  }

  /** Jobs taken out of the lines for a cancel that did not cancel them: they go on first. */
  private goOn(jobs: readonly Job[]): void {
    if (this.stopping) this.unstarted.push(...jobs);
    else this.backlog.unshift(...jobs);
    this.pump();
    this.onRoom();
  }

  /**
   * Stops starting mail, waits for transactions in flight (until `deadline`) to finish and be
   * recorded, and gives back the claimed mail that was never started, so the next worker takes
   * it at once.
   */
  async drain(deadline: number): Promise<void> {
    this.stopping = true;
    this.health.stop();
    // Mail not begun goes back at once, not after the transactions in flight: another worker may
    // take it meanwhile, and a cancel finds it queued instead of waiting on a stopping worker.
    const waiting = [...this.backlog.splice(0), ...this.relays.unparkAll().map((parked) => parked.job)];
    await this.queue.release(waiting.map((job) => job.row));
    while (this.running.size > 0 && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    // Outcomes the store still refuses stay leased; the stale heartbeat returns them.
    this.queue.giveUp();
    // Parked only now: a job still loading when the stop began may have parked since.
    const late = [...this.relays.unparkAll().map((parked) => parked.job), ...this.unstarted.splice(0)];
    await this.queue.flush();
    await this.queue.release(late.map((job) => job.row));
    this.queue.close();
    if (this.active > 0)
      this.logger.warn({ inFlight: this.active }, 'stopped with SMTP transactions still in flight');
  }

  private pump(): void {
    while (this.mayStart() && this.backlog.length > 0) this.start(this.backlog.shift()!);
  }

  /** Whether one more lane may start. */
  private mayStart(): boolean {
    const { concurrency } = this.options;
    return !this.stopping && this.active < concurrency && this.recording < concurrency;
  }

  /**
   * Takes a lane for a claimed job: loads what it needs (once per claimed batch), then sends it,
   * or parks it behind its relay when the relay has no room. `held`: the relay whose lane a job
   * taken out of its parking holds while it loads again (startParked); the lane is given back
   * before it is dispatched, which takes it again unless its relay changed, and then the next
   * parked job takes it.
   */
  private start(job: Job, held: string | null = null): void {
    let holding = held;
    const letGo = () => {
      if (holding === null) return;
      this.relays.free(holding);
      holding = null;
    };
    if (this.ofDeletedProject(job)) {
      letGo();
      this.track(this.dropped([job]));
      if (held !== null) this.startParked(held);
      return;
    }
    this.active++;
    const starting = (async () => {
      if (job.suppressed !== null) {
        letGo();
        // Fails without rendering or any SMTP transaction (product.md §5).
        const failure = {
          kind: 'permanent' as const,
          message: suppressedMessage(job.suppressed),
          smtpCode: null,
        };
        return this.attempt(job, null, null, () => Promise.resolve(failedBeforeSending(failure)));
      }
      let context: DeliveryContext | null;
      let loadFailure: unknown = null;
      let canceled: boolean;
      this.cancels.loadStarted(job);
      try {
        context = await job.batch.load(job.row.project_id, job.row.template);
      } catch (err) {
        context = null;
        loadFailure = err;
      } finally {
        canceled = this.cancels.loadFinished(job);
      }
      letGo();
      if (canceled) {
        // A cancel came while it loaded: it gives its lane back before any transaction began.
        this.active--;
        return this.track(this.cancels.cancel([job]).then((back) => this.goOn(back)));
      }
      // Its project was deleted while it loaded.
      if (this.ofDeletedProject(job)) return this.dropFromLane(job);
      if (loadFailure !== null) return this.attempt(job, null, null, () => Promise.reject(loadFailure));
      if (this.stopping) {
        // Loaded after the stop began: given back with the backlog, never started.
        this.active--;
        this.unstarted.push(job);
        return;
      }
      const relays = context === null ? null : this.deliverer.relaysOf(context);
      if (context === null || relays === null)
        return this.attempt(job, null, null, () => this.deliverer.attempt(job.row, context));
      // Taken out of its parking, it keeps its place there should its relay still be full.
      this.dispatch({ job, context, relays, loadedAt: this.now() }, held !== null);
    })()
      .catch((err: unknown) => {
        // Nothing above throws today; if it ever does, the lane and the lease must not leak.
        this.logger.error({ err, requestId: job.row.request_id }, 'starting a delivery failed');
        letGo();
        this.active--;
        this.unstarted.push(job);
      })
      .then(() => {
        if (held !== null) this.startParked(held);
      });
    this.track(starting);
  }

  /**
   * Sends a job that holds a lane to the relay its attempt goes to (domain/relay-health.ts
   * `routeAttempt`), or parks it there when the relay has no room. When its relays are down the
   * attempt is not made: it fails at once with `Relay down: …`, without a connection.
   */
  private dispatch(routed: Routed, first = false): void {
    const { job, relays } = routed;
    // Its project was deleted while it waited for its relay.
    if (this.ofDeletedProject(job)) return this.dropFromLane(job);
    const route = routeAttempt({
      lastRole: job.row.relay,
      retry: job.row.attempts > 1,
      primary: this.health.health(relays.primary.relay),
      fallback: relays.fallback === null ? null : this.health.health(relays.fallback.relay),
    });
    const relay = route.role === 'primary' ? relays.primary : relays.fallback!;
    if (route.kind === 'down') {
      const failure = { kind: 'transient' as const, message: route.message, smtpCode: null };
      const down = { role: route.role, relay: relay.relay, unreachable: true, fallbackReady: false };
      return this.attempt(job, null, down, () => Promise.resolve(failedBeforeSending(failure)));
    }
    if (!this.relays.mayStart(relay.relay, this.active)) {
      // The relay holds its window, or only the reserved lanes are left: give the lane back, to
      // the rest of the backlog (other relays' mail may be behind this one's), and claim more.
      this.active--;
      this.relays.park(relay.relay, routed, first);
      this.pump();
      return this.onRoom();
    }
    this.attempt(job, { relay, role: route.role, routed }, null, () =>
      this.deliverer.attempt(job.row, routed.context, route.role),
    );
  }

  /**
   * A relay went down in this worker's view: the mail parked behind it goes back to the front of
   * the backlog, to its fallback or to an attempt not made. A relay that is back takes mail in a
   * small window again, and the mail that waited for it is due.
   */
  private relayChanged(relay: string, down: boolean): void {
    if (!down) {
      this.relays.reopen(relay);
      return this.onDue();
    }
    this.backlog.unshift(...this.relays.unparkRelay(relay).map((parked) => parked.job));
    this.pump();
  }

  /**
   * One attempt in a lane (already counted in `active`); its outcome is recorded after it. `lane`
   * is its way to a relay; `route`, for an attempt not made, the relay it was meant for.
   */
  private attempt(
    job: Job,
    lane: Lane | null,
    route: AttemptRoute | null,
    send: () => Promise<AttemptResult>,
  ): void {
    const startedAt = this.now();
    // The lane's place in its relay's window, taken as the transaction starts.
    const held = lane === null ? null : { lane, ticket: this.relays.take(lane.relay.relay) };
    const work = send()
      .catch((err: unknown): AttemptResult => {
        this.logger.error({ err, requestId: job.row.request_id }, 'delivery attempt crashed');
        const message = err instanceof Error ? err.message : String(err);
        return failedBeforeSending({ kind: 'transient', message, smtpCode: null });
      })
      .then(async (result) => {
        // The lane is free as soon as the relay has answered: the outcome is committed with the
        // next group, so SMTP concurrency does not wait on the database's sync. The lease is
        // held (and renewed) until the outcome is stored.
        this.active--;
        const finishedAt = this.now();
        let waitsAgain = false;
        let recordAs = route;
        if (held !== null) {
          const { lane, ticket } = held;
          const key = lane.relay.relay;
          const inFlight = this.relays.inFlight(key);
          const { round } = ticket;
          this.relays.learn(key, { round, inFlight, durationMs: finishedAt - startedAt }, result);
          waitsAgain = this.relays.refusedForRoom(key, result, ticket);
          // Still leased: it goes first when the relay has room again (or elsewhere, if it is down).
          if (waitsAgain) this.relays.park(key, lane.routed, true);
          recordAs = this.health.attempted(
            lane.relay,
            lane.role,
            result,
            inFlight,
            lane.routed.relays.fallback,
          );
        }
        // Counted before any lane starts again, so that the bound on outcomes waiting holds.
        if (!waitsAgain) this.recording++;
        try {
          if (held !== null) this.freeRelay(held.lane.relay.relay);
          this.pump();
          this.onRoom();
          if (!waitsAgain) await this.outcomes.record(job.row, result, recordAs, startedAt, finishedAt);
        } finally {
          if (!waitsAgain) this.recorded();
        }
      })
      .catch((err: unknown) => {
        // Only a stop gives up on an outcome the store refused: the row stays leased to this
        // worker, and its stale heartbeat returns it.
        this.logger.error({ err, requestId: job.row.request_id }, 'recording a delivery outcome failed');
      });
    this.track(work);
  }

  /**
   * A relay's lane came free: the jobs parked behind that relay take it at once, and as many more
   * lanes as its window has grown by.
   */
  private freeRelay(relay: string): void {
    this.relays.free(relay);
    this.startParked(relay);
  }

  /**
   * Starts the jobs parked behind a relay, as many as its window and the free lanes allow. One
   * parked for longer than what was loaded for it is trusted starts as a claimed job does, loading
   * its project's settings again: after a change of relay it goes to the new one.
   */
  private startParked(relay: string): void {
    while (this.mayStart() && this.relays.mayStart(relay, this.active + 1)) {
      const next = this.relays.unpark(relay);
      if (next === undefined) return;
      if (this.now() - next.loadedAt >= LOADED_FOR_MS) {
        // Its lane at the relay is held while it loads, so the loop takes no more than there is room for.
        this.relays.hold(relay);
        this.start(next.job, relay);
        continue;
      }
      this.active++;
      this.dispatch(next);
    }
  }

  /**
   * An outcome was stored (or given up on at a stop): the mail it held back starts, the mail parked
   * behind relays first, as it came first. A relay's lane may have come free while outcomes
   * held every start back, and its parked mail has nothing else in flight to start it.
   */
  private recorded(): void {
    this.recording--;
    for (const relay of this.relays.parkedRelays()) this.startParked(relay);
    this.pump();
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }
}
