import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { webhookBackoff } from '../domain/backoff.js';
import { TEST_EVENT, webhookAttempted, type WebhookAttempted } from '../domain/events.js';
import { mayUseLane, type LanePolicy } from '../domain/lanes.js';
import type { OutboundPolicy } from '../domain/outbound.js';
import type { LeaseQueue, RecordOutcomes } from '../queue/lease-queue.js';
import type { Consumer, Fill } from '../queue/loop.js';
import { FinishStatement, WEBHOOK_QUEUE } from '../storage/queue.js';
import type { Database, WebhookDeliveryRow, WebhookEndpointRow } from '../storage/schema.js';
import { dueEndpoints, endpointsById, eventsById, insertWebhookAttempt } from '../storage/webhooks.js';
import { postWebhook, type PostResult } from './post.js';
import { webhookHeaders } from '../security/webhook-signature.js';

/** The webhook settings the consumer uses (documented in config.ts). */
export interface WebhookOptions {
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly timeoutMs: number;
  /** Calls in flight per worker process. */
  readonly concurrency: number;
  /** Calls in flight per endpoint and worker process: a slow endpoint holds at most this many lanes. */
  readonly perEndpoint: number;
  /** How long an endpoint whose last call failed waits before it is called again (the poll). */
  readonly probeMs: number;
}

/** What one attempt came to, for metrics. */
export interface WebhookAttemptOutcome {
  readonly projectId: number;
  readonly outcome: 'success' | 'failure' | 'timeout';
}

/** A call as it ended, waiting to be stored. */
export interface Called {
  readonly result: PostResult;
  readonly next: WebhookAttempted;
  readonly startedAt: number;
}

interface Event {
  readonly webhook_id: string;
  readonly type: string;
  readonly payload: string;
}

/**
 * Webhook delivery as a consumer of the webhook queue: claims due deliveries per endpoint, signs
 * and posts each, and stores the attempt. It runs beside mail delivery in lanes of its own, so a
 * slow endpoint never takes a mail lane; each endpoint holds at most `perEndpoint` of them (one
 * while its last attempt failed: a dead endpoint probes instead of holding a share for its
 * backlog), and a project at most half and never the reserved quarter, so one project's dead
 * endpoints cannot delay another's events.
 */
export class WebhookConsumer implements Consumer {
  private readonly db: Kysely<Database>;
  private readonly lanes: LanePolicy;
  private readonly inFlight = new Map<number, number>();
  /** Endpoints whose last call failed, with the time it ended. */
  private readonly failing = new Map<number, number>();
  private readonly projectBusy = new Map<number, number>();
  private readonly running = new Set<Promise<void>>();
  private active = 0;
  private stopping = false;
  /** When the last claim began. */
  private filledAt = 0;
  /** What the last claim left out for want of room: endpoints at their limit, projects at their share. */
  private leftOut: { readonly endpoints: readonly number[]; readonly projects: readonly number[] } = {
    endpoints: [],
    projects: [],
  };
  /** Told when lanes came free (the loop may claim more). */
  onRoom: () => void = () => {};
  /** Told about every attempt made; must not throw. */
  onAttempt: ((outcome: WebhookAttemptOutcome) => void) | null = null;

  constructor(
    private readonly queue: LeaseQueue<'webhook_deliveries', Called>,
    private readonly deps: {
      /** Decrypts an endpoint's stored secret. */
      readonly openSecret: (sealed: string) => string;
      readonly outbound: OutboundPolicy;
      readonly logger: Logger;
    },
    private readonly options: WebhookOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.db = queue.db;
    const reserved = Math.ceil(options.concurrency / 4);
    this.lanes = {
      concurrency: options.concurrency,
      perRelay: Math.max(1, Math.min(Math.ceil(options.concurrency / 2), options.concurrency - reserved)),
      reserved,
    };
  }

  hasRoom(): boolean {
    return this.active < this.options.concurrency;
  }

  busy(): boolean {
    return this.active > 0;
  }

  /**
   * An endpoint or project the last claim left out has a lane again: its due rows are taken at
   * once, not at the next poll. A failing endpoint is the exception: it gets one call at a time,
   * `probeMs` after the last one ended (see `fill`), not calls back to back through its backlog.
   */
  roomReturned(): boolean {
    return (
      this.leftOut.endpoints.some(
        (id) => !this.failing.has(id) && (this.inFlight.get(id) ?? 0) < this.options.perEndpoint,
      ) || this.leftOut.projects.some((id) => this.projectRoom(id) > 0)
    );
  }

  /**
   * When the first failing endpoint that the last claim left to rest may be called again. One
   * whose rest ended before that claim began is not counted: that claim saw it (with nothing due
   * for it, or taken), so the loop does not claim for it again and again.
   */
  claimableAt(): number | null {
    let at: number | null = null;
    for (const [id, endedAt] of this.failing) {
      const until = endedAt + this.options.probeMs;
      if (until > this.filledAt && !this.inFlight.has(id) && (at === null || until < at)) at = until;
    }
    return at;
  }

  async fill(): Promise<Fill> {
    const saturated = [...this.inFlight].filter(([id, n]) => n >= this.limitOf(id)).map(([id]) => id);
    this.filledAt = this.now();
    const probeAfter = this.filledAt - this.options.probeMs;
    // A failing endpoint with no call in flight waits out `probeMs` since its last call, whatever
    // else (another endpoint's freed lane, a new event) starts this claim.
    const resting = [...this.failing]
      .filter(([id, endedAt]) => endedAt > probeAfter && !this.inFlight.has(id))
      .map(([id]) => id);
    const fullProjects = [...this.projectBusy.keys()].filter((id) => this.projectRoom(id) === 0);
    this.leftOut = { endpoints: saturated, projects: fullProjects };
    const free = this.options.concurrency - this.active;
    // Resting endpoints are not counted: the loop claims for them at `claimableAt`.
    const filtered = saturated.length + fullProjects.length > 0;
    const endpointIds = await dueEndpoints(
      this.db,
      this.now(),
      { endpoints: [...saturated, ...resting], projects: fullProjects },
      free,
    );
    let full = endpointIds.length >= free;
    if (endpointIds.length === 0) return { claimed: 0, full, filtered };
    const endpoints = new Map((await endpointsById(this.db, endpointIds)).map((e) => [e.id, e]));
    let claimed = 0;
    for (const endpointId of endpointIds) {
      const endpoint = endpoints.get(endpointId);
      if (endpoint === undefined || this.stopping) continue;
      const room = Math.min(
        this.limitOf(endpointId) - (this.inFlight.get(endpointId) ?? 0),
        this.projectRoom(endpoint.project_id),
      );
      if (room <= 0) continue;
      const { rows, extra: events } = await this.queue.claimAndRead({ endpointId, limit: room }, (claimed) =>
        eventsById(
          this.db,
          claimed.map((row) => row.event_id),
        ),
      );
      if (rows.length >= room) full = true;
      for (const row of rows) {
        const event = events.get(row.event_id);
        // Deleted with its project meanwhile (and the delivery with it).
        if (event === undefined) await this.queue.release([row]);
        else {
          this.dispatch(row, endpoint, event);
          claimed++;
        }
      }
    }
    return { claimed, full, filtered };
  }

  /** Stops claiming and waits (until `deadline`) for calls in flight to finish and be recorded. */
  async drain(deadline: number): Promise<void> {
    this.stopping = true;
    while (this.running.size > 0 && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    this.queue.giveUp();
    await this.queue.flush();
    this.queue.close();
  }

  private dispatch(delivery: WebhookDeliveryRow, endpoint: WebhookEndpointRow, event: Event): void {
    this.active++;
    increment(this.inFlight, endpoint.id);
    increment(this.projectBusy, endpoint.project_id);
    const startedAt = this.now();
    const work = this.call(endpoint, event)
      .then((result) => {
        if (result.ok) this.failing.delete(endpoint.id);
        else this.failing.set(endpoint.id, this.now());
        this.active--;
        decrement(this.inFlight, endpoint.id);
        decrement(this.projectBusy, endpoint.project_id);
        this.onRoom();
        this.onAttempt?.({ projectId: delivery.project_id, outcome: outcomeOf(result) });
        const policy = {
          // A test is answered once, and what it got is what the dashboard shows: retried, tests
          // clicked at a failing endpoint would each be tried for as long as a real event.
          maxAttempts: event.type === TEST_EVENT ? 1 : this.options.maxAttempts,
          backoff: webhookBackoff(this.options.retryBaseMs),
        };
        const next = webhookAttempted(delivery, result.ok, policy, this.now());
        return this.queue.finish(delivery, { result, next, startedAt });
      })
      .then(
        () => undefined,
        (err: unknown) => {
          // Only a stop gives up on an attempt the store refused: the delivery stays leased to
          // this worker, and its stale heartbeat returns it (at least once, same webhook-id).
          this.deps.logger.error({ err, deliveryId: delivery.id }, 'recording a webhook attempt failed');
        },
      );
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private async call(endpoint: WebhookEndpointRow, event: Event): Promise<PostResult> {
    let secret: string;
    try {
      secret = this.deps.openSecret(endpoint.secret_enc);
    } catch (error) {
      return { ok: false, statusCode: null, latencyMs: 0, excerpt: null, error: (error as Error).message };
    }
    const timestamp = Math.floor(this.now() / 1000);
    return postWebhook(
      {
        url: endpoint.url,
        headers: webhookHeaders(secret, event.webhook_id, timestamp, event.payload),
        body: event.payload,
      },
      { timeoutMs: this.options.timeoutMs, outbound: this.deps.outbound },
    );
  }

  private limitOf(endpointId: number): number {
    return this.failing.has(endpointId) ? 1 : this.options.perEndpoint;
  }

  /** How many more lanes a project may take now (lanes.ts: its share, never the reserve once it has one). */
  private projectRoom(projectId: number): number {
    const busy = this.projectBusy.get(projectId) ?? 0;
    let room = 0;
    while (
      this.active + room < this.lanes.concurrency &&
      mayUseLane(this.lanes, busy + room, this.active + room + 1)
    )
      room++;
    return room;
  }
}

const FINISH = new FinishStatement(WEBHOOK_QUEUE, [
  'state',
  'run_at',
  'last_status_code',
  'last_error',
  'updated_at',
] as const);

/** Stores a group of webhook attempts: each delivery's new state, and the attempt with its answer. */
export function recordCalls(
  owner: string,
  now: () => number = Date.now,
): RecordOutcomes<WebhookDeliveryRow, Called> {
  return (tx, items) =>
    FINISH.runEach(
      tx,
      owner,
      items,
      ({ outcome: { result, next } }) => ({
        state: next.state,
        run_at: next.runAt,
        last_status_code: result.statusCode,
        last_error: result.error,
        updated_at: now(),
      }),
      async ({ row, outcome: { result, startedAt } }) => {
        await insertWebhookAttempt(tx, {
          delivery_id: row.id,
          attempt: row.attempts,
          started_at: startedAt,
          latency_ms: result.latencyMs,
          status_code: result.statusCode,
          excerpt: result.excerpt,
          error: result.error,
        });
      },
    );
}

function outcomeOf(result: PostResult): WebhookAttemptOutcome['outcome'] {
  if (result.ok) return 'success';
  return result.statusCode === null && /^Timed out/.test(result.error ?? '') ? 'timeout' : 'failure';
}

function increment(counts: Map<number, number>, key: number): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function decrement(counts: Map<number, number>, key: number): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left <= 0) counts.delete(key);
  else counts.set(key, left);
}
