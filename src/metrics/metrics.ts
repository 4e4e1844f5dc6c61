import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Facts about the queue read at scrape time (one indexed query each), not kept on every change. */
export interface QueueSnapshot {
  /** Notifications waiting (`queued`, due or scheduled) and being sent. */
  readonly queued: number;
  readonly sending: number;
  /** Age in seconds of the oldest message that is due and not yet claimed; 0 when none is due. */
  readonly oldestDueAgeSeconds: number;
}

/**
 * Herald's Prometheus metrics. One registry per running server (not prom-client's global one), so
 * several servers in one process, as in the tests, never share counts. Label values are bounded:
 * project ids and a fixed set of outcomes, never recipients or request ids.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly accepted: Counter<'project_id' | 'outcome'>;
  readonly delivered: Counter<'project_id' | 'outcome' | 'transport'>;
  /** Webhook deliveries by project and outcome (`success`, `failure`, `timeout`). */
  readonly webhookDeliveries: Counter<'project_id' | 'outcome'>;
  readonly smtpDuration: Histogram<'outcome'>;
  readonly httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  /** The in-process worker's window per relay (`host:port`), read at scrape time; none without one. */
  relayWindows: (() => ReadonlyMap<string, number>) | null = null;

  constructor(snapshot: () => Promise<QueueSnapshot>) {
    const registers = [this.registry];
    this.accepted = new Counter({
      name: 'herald_notifications_accepted_total',
      help: 'Send requests answered, by project and outcome (accepted, replayed, quota_exceeded, rejected)',
      labelNames: ['project_id', 'outcome'],
      registers,
    });
    this.delivered = new Counter({
      name: 'herald_notifications_delivered_total',
      help: 'Delivery attempts finished, by project and outcome (sent, retry, failed)',
      labelNames: ['project_id', 'outcome', 'transport'],
      registers,
    });
    this.webhookDeliveries = new Counter({
      name: 'herald_webhook_deliveries_total',
      help: 'Webhook delivery attempts, by project and outcome (success, failure, timeout)',
      labelNames: ['project_id', 'outcome'],
      registers,
    });
    this.smtpDuration = new Histogram({
      name: 'herald_smtp_transaction_duration_seconds',
      help: 'Duration of SMTP transactions, by outcome (sent, retry, failed)',
      labelNames: ['outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'herald_http_request_duration_seconds',
      help: 'Duration of HTTP requests, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    // The two queue gauges share one read per scrape.
    let pending: Promise<QueueSnapshot> | null = null;
    const read = () => (pending ??= snapshot().finally(() => setTimeout(() => (pending = null), 0)));
    new Gauge({
      name: 'herald_queue_depth',
      help: 'Notifications not finished yet, by state (queued includes scheduled and retrying ones)',
      labelNames: ['state'],
      registers,
      async collect() {
        const s = await read();
        this.set({ state: 'queued' }, s.queued);
        this.set({ state: 'sending' }, s.sending);
      },
    });
    new Gauge({
      name: 'herald_queue_oldest_due_age_seconds',
      help: 'Age of the oldest due notification not yet claimed by a worker (0 when none is due)',
      registers,
      async collect() {
        this.set((await read()).oldestDueAgeSeconds);
      },
    });
    const windows = () => this.relayWindows?.() ?? [];
    new Gauge({
      name: 'herald_smtp_relay_window',
      help: 'SMTP transactions the worker in this process may have in flight to each relay, learned from its answers',
      labelNames: ['relay'],
      registers,
      collect() {
        this.reset();
        for (const [relay, size] of windows()) this.set({ relay }, size);
      },
    });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
