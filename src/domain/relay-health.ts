import type { AttemptResult, DeliveryFailure } from './attempt.js';

/**
 * When a relay (host and port) is down, how Herald learns that it is back, and where a message
 * goes meanwhile (product.md §10), as Postfix's queue manager does it: a destination whose
 * concurrency has fallen to zero with failures is marked dead, its mail is deferred together
 * without a connection each, and it is probed, one connection at a time, until it answers.
 *
 * - **Down.** An attempt that gets no connection, no greeting (a refusal, `421` at the greeting, a
 *   failed TLS handshake) or runs past the transaction deadline is a failure of the relay, not of
 *   the message. After DOWN_AFTER of them in a row, with none reaching the relay in between, the
 *   last one with nothing else of the worker's in flight to the relay (its window, which halves on
 *   each such failure, has fallen to one: the relay takes nothing at all), the relay is down.
 *   Replies after the greeting (`451`, `550 5.1.1`) are about the message: the relay is up.
 * - **Probes.** A down relay is probed with one connection (greeting and EHLO, then QUIT) at a time
 *   across all workers, first PROBE_BASE_MS after it went down, then at double the interval after
 *   each failed probe, up to PROBE_MAX_MS. The first probe comes no later than a message's first
 *   retry would (the base is at most HERALD_DELIVERY_RETRY_BASE_MS), and at the ceiling a relay
 *   down for hours costs it one connection a minute while its mail still flows within a minute
 *   of its return. (Postfix re-probes a dead destination every 300 s; notification mail, a sign-in
 *   code, does not wait that long.)
 * - **Waiting mail.** A message due while its relay is down goes to the fallback relay if there is
 *   one that is up; otherwise its attempt fails at once with `Relay down: <the relay's last
 *   failure>`, counted and retried on the message's own schedule, so its final state comes when it
 *   would have come had each attempt been made. When a probe (or any attempt) reaches the relay
 *   again, the mail waiting for it is due at once, and the worker's window to it starts at one
 *   again (relay-window.ts `reopenWindow`), so the queue does not arrive as one burst.
 */

/** Failures in a row, none reaching the relay, that make it down (the last one alone in flight). */
export const DOWN_AFTER = 3;
/** The first probe of a down relay, at the defaults (see `relayHealthPolicy`). */
export const PROBE_BASE_MS = 5_000;
/** The longest wait between two probes of a relay that stays down. */
export const PROBE_MAX_MS = 60_000;
/** However small the retry base, a dead relay gets at most five probes a second. */
export const MIN_PROBE_MS = 200;

export interface RelayHealthPolicy {
  readonly downAfter: number;
  readonly probeBaseMs: number;
  readonly probeMaxMs: number;
}

/**
 * The policy for a deployment: the first probe after min(PROBE_BASE_MS, the first retry delay), the
 * interval doubling to twelve times that, at most PROBE_MAX_MS (5 s … 60 s at the defaults).
 */
export function relayHealthPolicy(options: { retryBaseMs: number }): RelayHealthPolicy {
  const probeBaseMs = Math.max(MIN_PROBE_MS, Math.min(PROBE_BASE_MS, options.retryBaseMs));
  return { downAfter: DOWN_AFTER, probeBaseMs, probeMaxMs: Math.min(PROBE_MAX_MS, 12 * probeBaseMs) };
}

/**
 * A relay down this long with no mail waiting for it (its project moved to another relay, or all
 * its mail reached its final state) is forgotten instead of probed: no probe a minute forever, no
 * `herald_smtp_relay_up 0` that nobody can clear. The next message to it tries it again.
 */
export const FORGET_AFTER_MS = 3_600_000;

/** The wait before the next probe, after `failedProbes` probes have failed since the relay went down. */
export function probeDelay(failedProbes: number, policy: RelayHealthPolicy): number {
  return Math.min(policy.probeMaxMs, policy.probeBaseMs * 2 ** Math.min(failedProbes, 30));
}

/** What is known of a relay, shared by every worker (it is kept in the database). */
export interface RelayHealth {
  /** Failures of the relay in a row, none reaching it since. */
  readonly failures: number;
  /** When it was judged down; null while it is up. */
  readonly downSince: number | null;
  /** The last failure of the relay, as it would be a message's error (kept while it is up, for the record). */
  readonly lastError: string | null;
  /** Probes that failed since it went down. */
  readonly probes: number;
  /** While down: when the next probe may start. */
  readonly probeAt: number | null;
}

export const HEALTHY: RelayHealth = Object.freeze({
  failures: 0,
  downSince: null,
  lastError: null,
  probes: 0,
  probeAt: null,
});

export function isDown(health: RelayHealth): boolean {
  return health.downSince !== null;
}

export function probeDue(health: RelayHealth, now: number): boolean {
  return health.downSince !== null && health.probeAt !== null && health.probeAt <= now;
}

/** A relay that was down and is not any more: its waiting mail is due, its window starts small. */
export function recovered(before: RelayHealth, after: RelayHealth): boolean {
  return before.downSince !== null && after.downSince === null;
}

/** Whether a down relay may be forgotten now, if no mail waits for it. */
export function forgettable(health: RelayHealth, now: number): boolean {
  return health.downSince !== null && now - health.downSince >= FORGET_AFTER_MS;
}

/** Whether the relay was reached: its greeting came. */
export type RelayContact = 'reached' | 'unreachable';

/**
 * What a failure says about its relay: unreachable when no connection or greeting came (the SMTP
 * adapter's `reached: false`) or the transaction ran past its deadline, and it is worth another
 * attempt; reached when the relay answered; null when it says nothing either way (Herald's own
 * refusal, such as an outbound rule, or a peer that is not an SMTP server).
 */
export function failureContact(failure: DeliveryFailure): RelayContact | null {
  if (failure.kind === 'transient' && (failure.reached === false || failure.timedOut === true))
    return 'unreachable';
  return failure.reached === true ? 'reached' : null;
}

/** What an attempt's result says about the relay it went to. */
export function attemptContact(result: AttemptResult): RelayContact | null {
  if (result.transport !== 'smtp') return null;
  return result.ok ? 'reached' : failureContact(result.failure);
}

export interface ContactReport {
  readonly contact: RelayContact;
  /** An unreachable attempt's failure message. */
  readonly error: string | null;
  /** No other transaction of the worker's to the relay was in flight when this one ended. */
  readonly alone: boolean;
}

/** The relay after an attempt to it ended. */
export function afterAttempt(
  health: RelayHealth,
  report: ContactReport,
  now: number,
  policy: RelayHealthPolicy,
): RelayHealth {
  if (report.contact === 'reached')
    return health.failures === 0 && health.downSince === null
      ? health
      : { ...HEALTHY, lastError: health.lastError };
  const failures = health.failures + 1;
  const lastError = report.error ?? health.lastError;
  if (health.downSince !== null) return { ...health, failures, lastError };
  if (failures >= policy.downAfter && report.alone)
    return { failures, downSince: now, lastError, probes: 0, probeAt: now + probeDelay(0, policy) };
  return { ...health, failures, lastError };
}

/** The relay after a probe: up when its greeting came, else the next probe later. */
export function afterProbe(
  health: RelayHealth,
  probe: { readonly contact: RelayContact | null; readonly error: string | null },
  now: number,
  policy: RelayHealthPolicy,
): RelayHealth {
  if (probe.contact === 'reached') return { ...HEALTHY, lastError: health.lastError };
  if (health.downSince === null) return health;
  const probes = health.probes + 1;
  return {
    ...health,
    probes,
    lastError: probe.error ?? health.lastError,
    probeAt: now + probeDelay(probes, policy),
  };
}

/** The error of an attempt not made because its relay is down. */
export function relayDownMessage(health: RelayHealth): string {
  return `Relay down: ${health.lastError ?? 'no connection'}`;
}

// Where an attempt goes ----------------------------------------------------------------------

/** Which of a message's relays an attempt goes to. */
export type RelayRole = 'primary' | 'fallback';

export interface RouteFacts {
  /** The relay of the message's last attempt; null before its first. */
  readonly lastRole: RelayRole | null;
  /** The message has been attempted before (it is due again after a transient failure). */
  readonly retry: boolean;
  readonly primary: RelayHealth;
  /** Null when the message has no fallback relay. */
  readonly fallback: RelayHealth | null;
}

/** Which relay an attempt went to (or was meant for), as the worker chose it. */
export interface AttemptRoute {
  readonly role: RelayRole;
  /** The relay, host and port. */
  readonly relay: string;
  /** The attempt did not reach the relay, or was not made because it is down: the message waits for it. */
  readonly unreachable: boolean;
  /** A fallback relay that is up: after a transient failure on the primary it takes the next attempt at once. */
  readonly fallbackReady: boolean;
}

export type Route =
  | { readonly kind: 'send'; readonly role: RelayRole }
  /** Every relay the message may use is down: the attempt fails at once with `message`. */
  | { readonly kind: 'down'; readonly role: RelayRole; readonly message: string };

/**
 * The relay of a message's next attempt. After a transient failure on the primary the fallback
 * takes the next attempt, then the primary again (after the back-off), as Postfix tries its
 * `smtp_fallback_relay` after the primary in each delivery attempt. A relay that is down is
 * passed over for the other; with both down (or no fallback) the attempt is not made.
 */
export function routeAttempt(facts: RouteFacts): Route {
  const preferred: RelayRole =
    facts.fallback !== null && facts.retry && facts.lastRole === 'primary' ? 'fallback' : 'primary';
  const health = (role: RelayRole) => (role === 'primary' ? facts.primary : facts.fallback);
  if (!isDown(health(preferred)!)) return { kind: 'send', role: preferred };
  const other: RelayRole = preferred === 'primary' ? 'fallback' : 'primary';
  const otherHealth = health(other);
  if (otherHealth !== null && !isDown(otherHealth)) return { kind: 'send', role: other };
  return { kind: 'down', role: preferred, message: relayDownMessage(health(preferred)!) };
}
