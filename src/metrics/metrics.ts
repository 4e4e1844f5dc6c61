import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Facts about the queue read at scrape time (one indexed query each), not kept on every change. */
export interface QueueSnapshot {
  /** Notifications waiting (`queued`, due or scheduled) and being sent. */
  readonly queued: number;
  readonly sending: number;
  /** Age in seconds of the oldest message that is due and not yet claimed; 0 when none is due. */
  readonly oldestDueAgeSeconds: number;
}

/**
 * The counters and histograms the server updates, by the Metrics field that holds each. Every
 * label value is bounded: project ids and fixed sets of outcomes, never recipients or request ids.
 */
const COUNTERS = {
  accepted: {
    name: 'herald_notifications_accepted_total',
    help: 'Send requests answered, by project and outcome (accepted, replayed, quota_exceeded, rejected)',
    labelNames: ['project_id', 'outcome'],
  },
  delivered: {
    name: 'herald_notifications_delivered_total',
    help: 'Delivery attempts finished, by project and outcome (sent, retry, failed)',
    labelNames: ['project_id', 'outcome', 'transport'],
  },
  webhookDeliveries: {
    name: 'herald_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by project and outcome (success, failure, timeout)',
    labelNames: ['project_id', 'outcome'],
  },
  dashboardLogins: {
    name: 'herald_dashboard_logins_total',
    help: 'Dashboard login attempts, by outcome (success, failure, throttled: refused unchecked after too many failures)',
    labelNames: ['outcome'],
  },
  httpConnectionsRefused: {
    name: 'herald_http_connections_refused_total',
    help: 'HTTP connections closed at once because their client already held HERALD_HTTP_MAX_CONNECTIONS_PER_CLIENT',
    labelNames: [],
  },
  apiLogDropped: {
    name: 'herald_api_log_dropped_total',
    help: 'API log entries dropped because the buffer was full while the database could not take them, by kind (authenticated, unauthenticated)',
    labelNames: ['kind'],
  },
  bounceImapMessages: {
    name: 'herald_bounce_imap_messages_total',
    help: 'Messages read from the bounce mailbox, by outcome (bounced, soft_bounce, complained, ignored, duplicate, unrecognized, forged, too_large)',
    labelNames: ['outcome'],
  },
  bounceReportsRefused: {
    name: 'herald_bounce_reports_refused_total',
    help: 'Bounce reports answered 451 by the listener because too many were waiting to be parsed',
    labelNames: [],
  },
} as const;

const HISTOGRAMS = {
  smtpDuration: {
    name: 'herald_smtp_transaction_duration_seconds',
    help: 'Duration of SMTP transactions, by outcome (sent, retry, failed)',
    labelNames: ['outcome'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  },
  httpDuration: {
    name: 'herald_http_request_duration_seconds',
    help: 'Duration of HTTP requests, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  },
} as const;

type Definition<L extends string> = {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
};

/** A registry's metrics as data (prom-client's `getMetricsAsJSON`), to pass between processes. */
export type MetricsData = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/**
 * What a delivery process counts (mail, webhooks, bounces): role all's child reports these to its
 * parent, whose `/metrics` adds them to its own, in which they stay at zero.
 */
const DELIVERY_METRICS: ReadonlySet<string> = new Set([
  COUNTERS.delivered.name,
  COUNTERS.webhookDeliveries.name,
  COUNTERS.bounceImapMessages.name,
  COUNTERS.bounceReportsRefused.name,
  HISTOGRAMS.smtpDuration.name,
  'herald_bounce_imap_connected',
  'herald_bounce_reports_waiting',
  'herald_smtp_relay_window',
]);

/**
 * Herald's Prometheus metrics. One registry per running server (not prom-client's global one), so
 * several servers in one process, as in the tests, never share counts.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly accepted = this.counter(COUNTERS.accepted);
  readonly delivered = this.counter(COUNTERS.delivered);
  readonly webhookDeliveries = this.counter(COUNTERS.webhookDeliveries);
  readonly apiLogDropped = this.counter(COUNTERS.apiLogDropped);
  readonly dashboardLogins = this.counter(COUNTERS.dashboardLogins);
  readonly httpConnectionsRefused = this.counter(COUNTERS.httpConnectionsRefused);
  readonly bounceImapMessages = this.counter(COUNTERS.bounceImapMessages);
  readonly bounceReportsRefused = this.counter(COUNTERS.bounceReportsRefused);
  readonly bounceImapConnected = new Gauge({
    name: 'herald_bounce_imap_connected',
    help: 'Whether this process is logged in to the bounce mailbox and watching it (1) or not (0: connecting, or backing off after a failure)',
    registers: [this.registry],
  });
  readonly smtpDuration = this.histogram(HISTOGRAMS.smtpDuration);
  readonly httpDuration = this.histogram(HISTOGRAMS.httpDuration);
  /** The in-process worker's window per relay (`host:port`), read at scrape time; none without one. */
  relayWindows: (() => ReadonlyMap<string, number>) | null = null;
  /** API log entries waiting to be written, read at scrape time. */
  apiLogBuffered: (() => number) | null = null;
  /** Bounce reports waiting for the parsing thread, read at scrape time. */
  bounceReportsWaiting: (() => number) | null = null;
  /** Bytes of large request bodies in flight (http/large-bodies.ts), read at scrape time. */
  largeBodyBytes: (() => number) | null = null;
  /**
   * Role all's parent: the delivery metrics of its child process, read at scrape time (null when the
   * child does not answer, restarting: the scrape then has this process's own).
   */
  delivery: (() => Promise<MetricsData | null>) | null = null;

  /**
   * `snapshot` reads the queue; `relays` what every worker knows of the relays (whether each is up),
   * from the database, so every process of a deployment reports the same.
   */
  constructor(
    snapshot: () => Promise<QueueSnapshot>,
    relays: () => Promise<ReadonlyMap<string, boolean>> = () => Promise.resolve(new Map()),
  ) {
    const registers = [this.registry];
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
    const apiLogBuffered = () => this.apiLogBuffered?.() ?? 0;
    new Gauge({
      name: 'herald_api_log_buffered',
      help: 'API log entries held in memory, waiting to be written (bounded; see herald_api_log_dropped_total)',
      registers,
      collect() {
        this.set(apiLogBuffered());
      },
    });
    new Gauge({
      name: 'herald_smtp_relay_up',
      help: 'Whether each SMTP relay (host:port) Herald has sent to is up (1) or judged down (0) and being probed',
      labelNames: ['relay'],
      registers,
      async collect() {
        const known = await relays();
        this.reset();
        for (const [relay, up] of known) this.set({ relay }, up ? 1 : 0);
      },
    });
    const largeBodyBytes = () => this.largeBodyBytes?.() ?? 0;
    new Gauge({
      name: 'herald_http_large_body_bytes',
      help: 'Bytes of request bodies over 256 KiB being read or checked now (bounded: past it such sends get 503)',
      registers,
      collect() {
        this.set(largeBodyBytes());
      },
    });
    const waiting = () => this.bounceReportsWaiting?.() ?? 0;
    new Gauge({
      name: 'herald_bounce_reports_waiting',
      help: 'Bounce reports waiting to be parsed off the event loop (bounded; past it the listener answers 451)',
      registers,
      collect() {
        this.set(waiting());
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

  private counter<L extends string>({ name, help, labelNames }: Definition<L>): Counter<L> {
    return new Counter({ name, help, labelNames: [...labelNames], registers: [this.registry] });
  }

  private histogram<L extends string>({
    name,
    help,
    labelNames,
    buckets,
  }: Definition<L> & { readonly buckets: readonly number[] }): Histogram<L> {
    return new Histogram({
      name,
      help,
      labelNames: [...labelNames],
      buckets: [...buckets],
      registers: [this.registry],
    });
  }

  async render(): Promise<string> {
    if (this.delivery === null) return this.registry.metrics();
    // The delivery metrics are the child's alone: while it does not answer they are left out, not
    // shown as this process's zeros, which Prometheus would read as counters reset.
    const [own, delivery] = await Promise.all([this.registry.getMetricsAsJSON(), this.delivery()]);
    const rest = own.filter((metric) => !DELIVERY_METRICS.has(metric.name));
    return AggregatorRegistry.aggregate(delivery === null ? [rest] : [rest, delivery]).metrics();
  }

  /**
   * The metrics this process counts as a delivery process, for role all's parent: only those,
   * so a scrape runs none of the others' collects (the queue gauges read the database).
   */
  async deliveryMetrics(): Promise<MetricsData> {
    const metrics = [...DELIVERY_METRICS].flatMap((name) => this.registry.getSingleMetric(name) ?? []);
    return Promise.all(metrics.map((metric) => metric.get())) as Promise<MetricsData>;
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
