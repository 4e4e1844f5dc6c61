import type { Logger } from 'pino';
import type { LeaseQueue } from '../queue/lease-queue.js';
import { cancelClaimed, cancelRequestsFor, refuseCancels, type ClaimOf } from '../storage/cancel-requests.js';
import type { NotificationRow } from '../storage/schema.js';
import type { Attempted } from './outcomes.js';

/** Claimed mail as a worker holds it. */
interface Held {
  readonly row: NotificationRow;
}

/** The cancels waiting for a worker, as one look found them. */
export interface Asked {
  readonly requests: readonly ClaimOf[];
  /** Whether a request asks about `job` under the claim it is held by. */
  about(job: Held): boolean;
}

/**
 * A worker's answers to cancels of the mail it has claimed (storage/cancel-requests.ts). The
 * consumer takes the mail asked about out of its lines (the backlog, the parked) before anything
 * waits, so that no lane can start it meanwhile; this decides the rest. Mail taken out is canceled
 * in the store, mail still loading its template is canceled once loaded, and the requests about
 * mail whose transaction has begun are refused: that mail goes on.
 */
export class ClaimedCancels<Job extends Held> {
  /** Jobs in a lane loading what they need, before their relay is chosen. */
  private readonly loading = new Set<Job>();
  /** Loading jobs a cancel asked about: canceled once loaded, instead of sent. */
  private readonly onLoad = new Set<Job>();
  /** Told once a cancel answered here has queued webhook deliveries. */
  onWebhooksQueued: () => void = () => {};

  constructor(
    private readonly queue: LeaseQueue<'notifications', Attempted>,
    private readonly logger: Logger,
    private readonly now: () => number,
  ) {}

  /** The requests waiting for this worker; null when none waits. */
  async asked(): Promise<Asked | null> {
    const requests = await cancelRequestsFor(this.queue.db, this.queue.owner);
    if (requests.length === 0) return null;
    const attempts = new Map(requests.map((request) => [request.id, request.attempts]));
    return { requests, about: (job) => attempts.get(job.row.id) === job.row.attempts };
  }

  /** The jobs loading what they need now. */
  get loadingJobs(): ReadonlySet<Job> {
    return this.loading;
  }

  /** `job` loads what it needs: a cancel asking meanwhile is answered once it has loaded. */
  loadStarted(job: Job): void {
    this.loading.add(job);
  }

  /** `job` has loaded: true when a cancel asked about it meanwhile, so it is canceled, not sent. */
  loadFinished(job: Job): boolean {
    this.loading.delete(job);
    return this.onLoad.delete(job);
  }

  /**
   * Answers `asked`: `waiting`, taken out of the consumer's lines, is canceled; loading jobs asked
   * about are canceled once loaded; the other requests, about mail on its way, are refused.
   * Resolves with the jobs of `waiting` that go on (see `cancel`).
   */
  answer(asked: Asked, waiting: readonly Job[]): Promise<Job[]> {
    for (const job of this.loading) if (asked.about(job)) this.onLoad.add(job);
    const notBegun = new Set([...waiting, ...this.onLoad].map((job) => job.row.id));
    return this.cancel(
      waiting,
      asked.requests.filter((request) => !notBegun.has(request.id)),
    );
  }

  /**
   * Cancels `waiting` and refuses `begun`. Resolves with the jobs not canceled, which go on:
   * withdrawn meanwhile (the canceler stopped waiting and answered 409), or not reached when the
   * store failed.
   */
  async cancel(waiting: readonly Job[], begun: readonly ClaimOf[] = []): Promise<Job[]> {
    const { db, owner } = this.queue;
    const back = [...waiting];
    try {
      await refuseCancels(db, owner, begun);
      for (const job of waiting) {
        const written = await this.queue.settle(job.row, (tx) =>
          cancelClaimed(tx, job.row, owner, this.now()),
        );
        if (written === undefined) continue;
        back.splice(back.indexOf(job), 1);
        if (written.webhookDeliveries > 0) this.onWebhooksQueued();
      }
    } catch (err) {
      this.logger.error({ err }, 'answering cancels failed; the mail they asked about goes on');
    }
    return back;
  }
}
