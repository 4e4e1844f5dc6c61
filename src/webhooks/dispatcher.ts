import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { webhookRetryDelay } from '../domain/events.js';
import { mayUseLane, type LanePolicy } from '../domain/lanes.js';
import type { OutboundPolicy } from '../domain/outbound.js';
import { GroupCommit } from '../services/group-commit.js';
import type { Database, WebhookDeliveryRow, WebhookEndpointRow } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';
import {
  dueEndpoints,
  endpointsById,
  eventsById,
  finishWebhookDelivery,
  insertWebhookAttempt,
  nextWebhookDueAt,
} from '../storage/webhooks.js';
import { postWebhook, type PostResult } from './post.js';
import { webhookHeaders } from './signature.js';

/** The webhook settings the dispatcher uses (documented in config.ts). */
export interface WebhookOptions {
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly timeoutMs: number;
  /** Calls in flight per worker process. */
  readonly concurrency: number;
  /** Calls in flight per endpoint and worker process: a slow endpoint holds at most this many lanes. */
  readonly perEndpoint: number;
  readonly pollMs: number;
  readonly stopTimeoutMs: number;
}

export interface WebhookDispatcherDeps {
  readonly storage: Storage;
  /** Decrypts an endpoint's stored secret. */
  readonly openSecret: (sealed: string) => string;
  readonly outbound: OutboundPolicy;
  readonly logger: Logger;
  /** The worker process's lease owner: its heartbeat vouches for these leases too. */
  readonly owner: string;
  readonly now?: () => number;
}

/** What one attempt came to, for metrics. */
export interface WebhookAttemptOutcome {
  readonly projectId: number;
  readonly outcome: 'success' | 'failure' | 'timeout';
}

interface Finished {
  readonly delivery: WebhookDeliveryRow;
  readonly startedAt: number;
  readonly result: PostResult;
}

/** Attempts whose lease outlives the call's deadline by this much before a peer may take them. */
const LEASE_SLACK_MS = 60_000;

/**
 * Delivers webhook events: claims due deliveries per endpoint, calls the endpoint, and records each
 * attempt. It runs in the worker process beside mail delivery but in lanes of its own, so a slow
 * endpoint never takes a mail lane; and each endpoint holds at most `perEndpoint` of its lanes, so
 * one project's dead endpoint cannot delay another's events.
 */
export class WebhookDispatcher {
  private readonly db: Kysely<Database>;
  private readonly now: () => number;
  private readonly inFlight = new Map<number, number>();
  /**
   * Endpoints whose last attempt failed: they get one lane until an attempt succeeds, so a dead
   * or timing-out endpoint probes instead of holding a whole share of lanes for its backlog.
   */
  private readonly failing = new Set<number>();
  /** Calls in flight per project: a project holds at most its share of the lanes. */
  private readonly projectBusy = new Map<number, number>();
  private readonly lanes: LanePolicy;
  private active = 0;
  private readonly running = new Set<Promise<void>>();
  private readonly recorder: GroupCommit<Finished, void>;
  private stopping = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  /** Told about every attempt made; must not throw. */
  onAttempt: ((outcome: WebhookAttemptOutcome) => void) | null = null;

  constructor(
    private readonly deps: WebhookDispatcherDeps,
    private readonly options: WebhookOptions,
  ) {
    this.db = deps.storage.db;
    this.now = deps.now ?? Date.now;
    // As with mail's relays (domain/lanes.ts): a project holds at most half the lanes and never
    // the reserved quarter, which goes only to projects with no call in flight, so one project's
    // many dead endpoints cannot keep another project's events waiting.
    const reserved = Math.ceil(options.concurrency / 4);
    this.lanes = {
      concurrency: options.concurrency,
      perRelay: Math.max(1, Math.min(Math.ceil(options.concurrency / 2), options.concurrency - reserved)),
      reserved,
    };
    // Attempts finish one by one; a few milliseconds of gathering saves a durable commit each.
    this.recorder = new GroupCommit((items) => this.commit(items), { maxDelayMs: 10, maxBatch: 200 });
  }

  start(): void {
    if (this.loop !== null) return;
    this.stopping = false;
    this.loop = this.run().catch((err: unknown) =>
      this.deps.logger.error({ err }, 'webhook delivery loop crashed'),
    );
  }

  /** An event may be due now (an outcome with events was just committed in this process). */
  wake(): void {
    this.wakeUp?.();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let claimed = 0;
      try {
        if (this.active < this.options.concurrency) claimed = await this.claim();
      } catch (err) {
        this.deps.logger.error({ err }, 'claiming webhook deliveries failed; retrying');
      }
      if (this.stopping) break;
      if (claimed === 0) await this.sleep(await this.idleDelay());
    }
  }

  private async claim(): Promise<number> {
    const now = this.now();
    const saturated = [...this.inFlight].filter(([id, n]) => n >= this.limitOf(id)).map(([id]) => id);
    const fullProjects = [...this.projectBusy.keys()].filter((id) => this.projectRoom(id) === 0);
    const free = this.options.concurrency - this.active;
    const endpointIds = await dueEndpoints(
      this.db,
      now,
      { endpoints: saturated, projects: fullProjects },
      free,
    );
    if (endpointIds.length === 0) return 0;
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
      const rows = await this.deps.storage.claimWebhooks({
        endpointId,
        now,
        owner: this.deps.owner,
        leaseUntil: now + this.options.timeoutMs + LEASE_SLACK_MS,
        limit: room,
      });
      if (rows.length === 0) continue;
      const events = await eventsById(
        this.db,
        rows.map((row) => row.event_id),
      );
      for (const row of rows) {
        const event = events.get(row.event_id);
        if (event === undefined) continue; // deleted with its project meanwhile
        this.dispatch(row, endpoint, event);
        claimed++;
      }
    }
    return claimed;
  }

  private dispatch(
    delivery: WebhookDeliveryRow,
    endpoint: WebhookEndpointRow,
    event: { readonly webhook_id: string; readonly payload: string },
  ): void {
    this.active++;
    this.inFlight.set(endpoint.id, (this.inFlight.get(endpoint.id) ?? 0) + 1);
    this.projectBusy.set(endpoint.project_id, (this.projectBusy.get(endpoint.project_id) ?? 0) + 1);
    const startedAt = this.now();
    const work = this.call(endpoint, event)
      .then((result) => {
        if (result.ok) this.failing.delete(endpoint.id);
        else this.failing.add(endpoint.id);
        this.release(endpoint);
        this.onAttempt?.({ projectId: delivery.project_id, outcome: outcomeOf(result) });
        return this.recorder.submit({ delivery, startedAt, result });
      })
      .catch((err: unknown) => {
        // Not recorded: the lease runs out and the delivery is made again.
        this.deps.logger.error({ err, deliveryId: delivery.id }, 'recording a webhook attempt failed');
      });
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private async call(
    endpoint: WebhookEndpointRow,
    event: { readonly webhook_id: string; readonly payload: string },
  ): Promise<PostResult> {
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

  private release(endpoint: WebhookEndpointRow): void {
    this.active--;
    decrement(this.inFlight, endpoint.id);
    decrement(this.projectBusy, endpoint.project_id);
    this.wake();
  }

  private async commit(items: readonly Finished[]): Promise<void[]> {
    const now = this.now();
    await this.db.transaction().execute(async (tx) => {
      for (const { delivery, startedAt, result } of items) {
        const exhausted = delivery.attempts >= this.options.maxAttempts;
        const stored = await finishWebhookDelivery(tx, delivery.id, this.deps.owner, {
          state: result.ok ? 'succeeded' : exhausted ? 'failed' : 'pending',
          runAt:
            result.ok || exhausted
              ? delivery.run_at
              : now + webhookRetryDelay(delivery.attempts, this.options.retryBaseMs),
          statusCode: result.statusCode,
          error: result.error,
          now,
        });
        if (!stored) continue;
        await insertWebhookAttempt(tx, {
          delivery_id: delivery.id,
          attempt: delivery.attempts,
          started_at: startedAt,
          latency_ms: result.latencyMs,
          status_code: result.statusCode,
          excerpt: result.excerpt,
          error: result.error,
        });
      }
    });
    return items.map(() => undefined);
  }

  private async idleDelay(): Promise<number> {
    if (this.active >= this.options.concurrency) return this.options.pollMs;
    try {
      // A delivery already due but not claimed waits for its endpoint's lane: a freed lane wakes
      // the loop, so there is no reason to spin until then.
      const next = await nextWebhookDueAt(this.db);
      const wait = next === null ? this.options.pollMs : next - this.now();
      if (wait > 0) return Math.min(this.options.pollMs, wait);
    } catch {
      // The next claim reports database trouble.
    }
    return this.options.pollMs;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = null;
        done();
      };
    });
  }

  /** Stops claiming and waits (bounded) for calls in flight to finish and be recorded. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
    this.loop = null;
    const deadline = this.now() + this.options.stopTimeoutMs;
    while (this.running.size > 0 && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await this.recorder.flush();
  }
}

function outcomeOf(result: PostResult): WebhookAttemptOutcome['outcome'] {
  if (result.ok) return 'success';
  return result.statusCode === null && /^Timed out/.test(result.error ?? '') ? 'timeout' : 'failure';
}

function decrement(counts: Map<number, number>, key: number): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left <= 0) counts.delete(key);
  else counts.set(key, left);
}
