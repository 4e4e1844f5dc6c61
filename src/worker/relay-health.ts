import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { AttemptResult } from '../domain/attempt.js';
import {
  afterAttempt,
  afterProbe,
  attemptContact,
  type AttemptRoute,
  type RelayRole,
  failureContact,
  FORGET_AFTER_MS,
  forgettable,
  HEALTHY,
  isDown,
  probeDue,
  type ContactReport,
  type RelayContact,
  type RelayHealth,
  type RelayHealthPolicy,
} from '../domain/relay-health.js';
import type { SmtpMailer } from '../mail/smtp.js';
import { SmtpDeliveryError } from '../mail/smtp-failures.js';
import {
  changeRelayHealth,
  claimProbe,
  endpointOf,
  forgetRelay,
  healthOf,
  listRelayHealth,
  releaseProbe,
  type RelayChange,
  type RelayEndpoint,
} from '../storage/relay-health.js';
import type { Database, RelayHealthRow } from '../storage/schema.js';

export interface RelayHealthOptions {
  readonly policy: RelayHealthPolicy;
  /** How long a probe may take (the transaction deadline); its lease lasts a little longer. */
  readonly probeTimeoutMs: number;
  /** How often what other workers learned is read (1 s). */
  readonly refreshMs?: number;
}

/** Reports kept per relay while the database cannot take them; older ones are dropped. */
const MAX_PENDING = 100;
const REFRESH_MS = 1_000;
/** A probe's lease outlasts its deadline by this much, then another worker may probe. */
const PROBE_LEASE_SLACK_MS = 5_000;

interface Pending {
  readonly endpoint: RelayEndpoint;
  readonly reports: { readonly report: ContactReport; readonly at: number }[];
}

/**
 * What one worker process knows of its relays (domain/relay-health.ts), kept in step with every
 * other worker through the database: the state as last stored, with this worker's reports not yet
 * stored applied on top, so it acts on its own failures at once and on other workers' within a
 * second. It also runs the probes of down relays whose turn has come, each after taking the
 * probe's lease, so one probe at a time reaches a relay whatever the number of workers.
 */
export class RelayHealthBook {
  private readonly stored = new Map<string, RelayHealthRow>();
  private readonly pending = new Map<string, Pending>();
  /** Reports being written now: still part of what this worker knows until the write returns. */
  private readonly writing = new Map<string, Pending>();
  private readonly probing = new Set<string>();
  private readonly seenDown = new Set<string>();
  private flushing = false;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private started = false;
  private first: Promise<void> | null = null;
  private stopped = false;
  /** Told when a relay goes down (true) or comes back (false), in this worker's view. */
  onChange: (relay: string, down: boolean) => void = () => {};

  constructor(
    private readonly db: Kysely<Database>,
    private readonly mailer: Pick<SmtpMailer, 'probe'>,
    private readonly owner: string,
    private readonly options: RelayHealthOptions,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Reads what is stored, then keeps reading it and probing down relays until `stop`. Resolves
   * after the first read: a worker that starts knows of the relays that are down before it sends.
   */
  start(): Promise<void> {
    if (this.first === null) {
      this.started = true;
      this.first = this.tick();
    }
    return this.first;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Runs the next tick at `at` unless one comes sooner. */
  private wakeAt(at: number): void {
    if (this.stopped || !this.started || at >= this.timerAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => void this.tick(), Math.max(10, at - this.now()));
    this.timer.unref?.();
  }

  health(relay: string): RelayHealth {
    const row = this.stored.get(relay);
    let health = row === undefined ? HEALTHY : healthOf(row);
    for (const pending of [this.writing.get(relay), this.pending.get(relay)])
      for (const { report, at } of pending?.reports ?? [])
        health = afterAttempt(health, report, at, this.options.policy);
    return health;
  }

  /** An attempt to the relay ended, reaching it or not. */
  report(endpoint: RelayEndpoint, report: ContactReport): void {
    const { relay } = endpoint;
    const health = this.health(relay);
    const known = this.stored.has(relay) || this.writing.has(relay) || this.pending.has(relay);
    // Most attempts reach a relay that is well: nothing to store.
    if (report.contact === 'reached' && known && health.failures === 0 && !isDown(health)) return;
    let pending = this.pending.get(relay);
    if (pending === undefined) this.pending.set(relay, (pending = { endpoint, reports: [] }));
    if (report.contact === 'reached' && pending.reports.at(-1)?.report.contact === 'reached') return;
    pending.reports.push({ report, at: this.now() });
    if (pending.reports.length > MAX_PENDING) pending.reports.shift();
    this.notice(relay);
    void this.flush();
  }

  /**
   * An attempt to `relay` ended with `inFlight` transactions of this worker's to it in flight, its
   * own included: what it says of the relay is kept, and the route it is recorded with returned.
   */
  attempted(
    relay: RelayEndpoint,
    role: RelayRole,
    result: AttemptResult,
    inFlight: number,
    fallback: RelayEndpoint | null,
  ): AttemptRoute {
    const contact = attemptContact(result);
    if (contact !== null)
      this.report(relay, {
        contact,
        error: result.ok ? null : result.failure.message,
        alone: inFlight === 1,
      });
    return {
      role,
      relay: relay.relay,
      unreachable: contact === 'unreachable',
      fallbackReady: fallback !== null && !isDown(this.health(fallback.relay)),
    };
  }

  /** Relays known to be down now. */
  downRelays(): string[] {
    return [...this.seenDown];
  }

  /** Tells of a relay that changed between down and up in this worker's view. */
  private notice(relay: string): void {
    const down = isDown(this.health(relay));
    if (down === this.seenDown.has(relay)) return;
    if (down) this.seenDown.add(relay);
    else this.seenDown.delete(relay);
    this.logger[down ? 'warn' : 'info'](
      { relay, lastError: this.health(relay).lastError },
      down
        ? 'relay is down; its mail waits for a probe to get through, with no connection per message'
        : 'relay is back',
    );
    try {
      this.onChange(relay, down);
    } catch (err) {
      this.logger.error({ err, relay }, 'reacting to a relay change failed');
    }
  }

  /** Stores the reports not yet stored, one relay at a time, until none are left. */
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.size > 0 && !this.stopped) {
        const [relay, pending] = this.pending.entries().next().value!;
        this.pending.delete(relay);
        this.writing.set(relay, pending);
        let change: RelayChange;
        try {
          change = await changeRelayHealth(this.db, pending.endpoint, this.now(), (health) =>
            pending.reports.reduce(
              (next, { report, at }) => afterAttempt(next, report, at, this.options.policy),
              health,
            ),
          );
        } catch (err) {
          // Kept, ahead of later reports; the next tick tries again.
          const later = this.pending.get(relay)?.reports ?? [];
          this.pending.set(relay, { endpoint: pending.endpoint, reports: [...pending.reports, ...later] });
          this.logger.warn({ err, relay }, 'storing what was learned of a relay failed; retrying');
          return;
        } finally {
          this.writing.delete(relay);
        }
        this.learned(change);
      }
    } finally {
      this.flushing = false;
    }
  }

  private learned(change: RelayChange): void {
    const { row } = change;
    const known = this.stored.get(row.relay);
    if (known === undefined || known.version <= row.version) this.stored.set(row.relay, row);
    if (change.madeDue > 0)
      this.logger.info(
        { relay: row.relay, messages: change.madeDue },
        'mail that waited for the relay is due',
      );
    this.notice(row.relay);
    const { probeAt } = this.health(row.relay);
    if (probeAt !== null) this.wakeAt(probeAt);
  }

  /** Reads what every worker stored, probes the down relays whose turn it is, and waits for the next. */
  private async tick(): Promise<void> {
    this.timer = null;
    this.timerAt = Infinity;
    if (this.stopped) return;
    try {
      const readAt = this.now();
      const rows = await listRelayHealth(this.db);
      for (const row of rows) {
        const known = this.stored.get(row.relay);
        if (known === undefined || known.version <= row.version) this.stored.set(row.relay, row);
        this.notice(row.relay);
      }
      // Forgotten by a worker (see forgettable): unless this one stored it since the read began.
      const listed = new Set(rows.map((row) => row.relay));
      for (const [relay, row] of this.stored)
        if (!listed.has(relay) && Number(row.updated_at) < readAt && !this.writing.has(relay)) {
          this.stored.delete(relay);
          this.notice(relay);
        }
    } catch (err) {
      this.logger.warn({ err }, 'reading relay health failed');
    }
    if (this.pending.size > 0) void this.flush();
    const now = this.now();
    let next = now + (this.options.refreshMs ?? REFRESH_MS);
    for (const [relay, row] of this.stored) {
      const health = this.health(relay);
      if (probeDue(health, now) && !this.probing.has(relay)) void this.probe(row);
      else if (isDown(health) && health.probeAt !== null) next = Math.min(next, health.probeAt);
    }
    this.wakeAt(next);
  }

  /** One probe of a down relay, if its lease is this worker's to take. */
  private async probe(row: RelayHealthRow): Promise<void> {
    const { relay } = row;
    this.probing.add(relay);
    try {
      const startedAt = this.now();
      if (
        forgettable(this.health(relay), startedAt) &&
        (await forgetRelay(this.db, relay, startedAt - FORGET_AFTER_MS))
      ) {
        this.stored.delete(relay);
        this.logger.info({ relay }, 'forgot a relay that stayed down with no mail waiting for it');
        return this.notice(relay);
      }
      const lease = startedAt + this.options.probeTimeoutMs + PROBE_LEASE_SLACK_MS;
      if (!(await claimProbe(this.db, relay, this.owner, startedAt, lease))) return;
      const endpoint = endpointOf(row);
      let outcome: { contact: RelayContact | null; error: string | null };
      try {
        await this.mailer.probe({
          host: endpoint.host,
          port: endpoint.port,
          security: endpoint.tls ? 'tls' : 'none',
          username: null,
          password: null,
          trusted: endpoint.trusted,
        });
        outcome = { contact: 'reached', error: null };
      } catch (error) {
        const failure =
          error instanceof SmtpDeliveryError
            ? error.failure
            : { kind: 'transient' as const, message: String(error), smtpCode: null, reached: false };
        outcome = { contact: failureContact(failure), error: failure.message };
      }
      if (this.stopped) return void (await releaseProbe(this.db, relay, this.owner));
      const change = await changeRelayHealth(
        this.db,
        endpoint,
        this.now(),
        (health) => afterProbe(health, outcome, this.now(), this.options.policy),
        { releaseProbe: this.owner },
      );
      this.logger.info(
        {
          relay,
          up: !isDown(healthOf(change.row)),
          error: outcome.error,
          durationMs: this.now() - startedAt,
        },
        'probed a relay that was down',
      );
      this.learned(change);
    } catch (err) {
      // A stop closes the mailer and the store under a probe in flight: its lease runs out.
      if (!this.stopped) this.logger.warn({ err, relay }, 'probing a relay failed');
    } finally {
      this.probing.delete(relay);
    }
  }
}
