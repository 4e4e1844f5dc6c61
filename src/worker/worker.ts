import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { retryDelay } from '../domain/retry.js';
import { insertAttempt } from '../storage/delivery-attempts.js';
import { GroupCommit } from '../storage/group-commit.js';
import { finishDelivery, nextDueAt, reclaimExpiredLeases, releaseClaims } from '../storage/notifications.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';
import type { AttemptResult, Deliverer, DeliveryBatch } from './deliver.js';

/** The delivery settings the worker loop uses (documented in config.ts). */
export type WorkerOptions = Pick<
  Config['delivery'],
  'maxAttempts' | 'retryBaseMs' | 'leaseMs' | 'batchSize' | 'pollMs' | 'concurrency' | 'stopTimeoutMs'
>;

interface Finished {
  readonly row: NotificationRow;
  readonly startedAt: number;
  readonly result: AttemptResult;
}

/**
 * The delivery worker. The notification row is the job: the worker claims due rows in batches,
 * which marks them `sending` under a lease (visibility timeout) before any SMTP transaction starts,
 * renews the lease while it works, and records `sent` right after the relay's 250. A worker that
 * dies leaves leases that expire; any worker then returns those rows to the queue. So a crash can
 * resend at most the messages that were in flight, and never loses one.
 */
export class DeliveryWorker {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly backlog: { row: NotificationRow; batch: DeliveryBatch }[] = [];
  /** Ids this worker holds a lease on: claimed and waiting, or being sent. */
  private readonly held = new Set<number>();
  private active = 0;
  /** Attempts whose outcome is not committed yet. */
  private readonly recording = new Set<Promise<void>>();
  private stopping = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  private nextReclaimAt = 0;
  private readonly recorder: GroupCommit<Finished, void>;

  constructor(
    private readonly storage: Storage,
    private readonly deliverer: Deliverer,
    private readonly options: WorkerOptions,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    // Outcomes are committed in groups too: with a durable commit per message the store, not the
    // relay, would bound delivery throughput.
    // Outcomes trickle in as relays answer, one lane at a time; waiting a few milliseconds lets a
    // commit carry dozens of them instead of one or two. Only the bookkeeping waits, not the mail.
    this.recorder = new GroupCommit((items) => this.record(items), { maxDelayMs: 10, maxBatch: 500 });
  }

  start(): void {
    if (this.loop !== null) return;
    this.stopping = false;
    this.renewTimer = setInterval(
      () => void this.renew(),
      Math.max(100, Math.floor(this.options.leaseMs / 3)),
    );
    this.loop = this.run().catch((err: unknown) => this.logger.error({ err }, 'delivery loop crashed'));
  }

  /** New work may be due now (the in-process API just accepted something). */
  wake(): void {
    this.wakeUp?.();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let claimed = 0;
      // Refill before the backlog runs dry, so the lanes never wait for a claim.
      if (this.backlog.length < Math.max(this.options.concurrency, this.options.batchSize / 2)) {
        try {
          claimed = await this.claim();
        } catch (err) {
          this.logger.error({ err }, 'claiming due notifications failed; retrying');
          await this.sleep(this.options.pollMs);
          continue;
        }
      }
      while (this.active < this.options.concurrency && this.backlog.length > 0)
        this.dispatch(this.backlog.shift()!);
      if (this.stopping) break;
      if (claimed === 0 || this.active >= this.options.concurrency) {
        await this.sleep(claimed === 0 && this.active === 0 ? await this.idleDelay() : this.options.pollMs);
      }
    }
  }

  private async claim(): Promise<number> {
    const now = this.now();
    if (now >= this.nextReclaimAt) {
      const reclaimed = await reclaimExpiredLeases(this.storage.db, now);
      if (reclaimed > 0)
        this.logger.warn({ reclaimed }, 'returned messages with expired leases to the queue');
      this.nextReclaimAt = now + Math.max(250, Math.floor(this.options.leaseMs / 4));
    }
    const rows = await this.storage.claimDue({
      now,
      owner: this.owner,
      leaseUntil: now + this.options.leaseMs,
      limit: this.options.batchSize,
    });
    if (rows.length === 0) return 0;
    const batch = this.deliverer.batch();
    for (const row of rows) {
      this.held.add(row.id);
      this.backlog.push({ row, batch });
    }
    return rows.length;
  }

  private dispatch(job: { row: NotificationRow; batch: DeliveryBatch }): void {
    this.active++;
    const startedAt = this.now();
    const recorded = job.batch
      .attempt(job.row)
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
        this.wake();
        return this.recorder.submit({ row: job.row, startedAt, result });
      })
      .catch((err: unknown) => {
        // The outcome could not be stored; the lease will expire and the message be retried.
        this.logger.error({ err, requestId: job.row.request_id }, 'recording a delivery outcome failed');
      })
      .finally(() => {
        this.held.delete(job.row.id);
        this.recording.delete(recorded);
      });
    this.recording.add(recorded);
  }

  private async record(items: readonly Finished[]): Promise<void[]> {
    const now = this.now();
    await this.storage.db.transaction().execute(async (tx) => {
      for (const item of items) await this.recordOne(tx, item, now);
    });
    return items.map(() => undefined);
  }

  private async recordOne(
    tx: Kysely<Database>,
    { row, startedAt, result }: Finished,
    now: number,
  ): Promise<void> {
    const rendered = result.rendered
      ? { subject: result.rendered.subject, text_body: result.rendered.text, html_body: result.rendered.html }
      : {};
    let outcome: 'sent' | 'retry' | 'failed';
    let stored: boolean;
    if (result.ok) {
      outcome = 'sent';
      stored = await finishDelivery(tx, row.id, this.owner, {
        ...rendered,
        state: 'sent',
        sent_at: now,
        updated_at: now,
        transport: result.transport,
        message_id: result.messageId,
        error_message: null,
      });
    } else {
      const retry = result.failure.kind === 'transient' && row.attempts < this.options.maxAttempts;
      outcome = retry ? 'retry' : 'failed';
      stored = await finishDelivery(tx, row.id, this.owner, {
        ...rendered,
        state: retry ? 'queued' : 'failed',
        run_at: retry ? now + retryDelay(row.attempts, this.options.retryBaseMs) : row.run_at,
        updated_at: now,
        transport: result.transport,
        message_id: result.messageId,
        error_message: result.failure.message,
      });
    }
    if (!stored) {
      this.logger.warn({ requestId: row.request_id }, 'lease lost before the outcome was recorded');
      return;
    }
    await insertAttempt(tx, {
      notification_id: row.id,
      attempt: row.attempts,
      started_at: startedAt,
      finished_at: now,
      outcome,
      smtp_code: result.ok ? result.smtpCode : result.failure.smtpCode,
      response: result.ok ? result.response : result.failure.message,
      transport: result.transport,
    });
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

  private async idleDelay(): Promise<number> {
    try {
      const next = await nextDueAt(this.storage.db);
      if (next !== null) return Math.min(this.options.pollMs, Math.max(0, next - this.now()));
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
    await this.recorder.flush();
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    const ids = waiting.map((job) => job.row.id);
    for (const id of ids) this.held.delete(id);
    try {
      await releaseClaims(this.storage.db, ids, this.owner, this.now());
    } catch (err) {
      this.logger.warn({ err }, 'releasing claimed messages failed; their leases will expire');
    }
    if (this.active > 0)
      this.logger.warn({ inFlight: this.active }, 'stopped with SMTP transactions still in flight');
  }
}
