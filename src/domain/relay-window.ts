import { enhancedStatusIn } from './bounce/status-codes.js';

/**
 * How many SMTP transactions a worker keeps in flight to one relay (host and port), learned from
 * the relay's answers as Postfix's destination concurrency feedback and TCP's congestion window
 * do. A relay across the internet takes a second per message but many messages at once, while a
 * small relay refuses connections past a few: no fixed number suits both.
 *
 * The window starts at `initial` and doubles per round of prompt acceptances (slow start) until
 * the relay first shows congestion; from then on it grows by one per window's worth of prompt
 * acceptances. Congestion (421, a 4.7.x throttling reply, a connection that failed or timed out)
 * halves it, once per round: transactions that started before a cut were sent at the larger window
 * and were answered by that cut. It never leaves [1, ceiling].
 */

export interface WindowPolicy {
  /** Transactions a relay gets before anything is known of it. */
  readonly initial: number;
  /** HERALD_SMTP_MAX_CONNECTIONS: the window never grows past it. */
  readonly ceiling: number;
  /**
   * A transaction that took longer than this is no evidence that the relay has room to spare:
   * it says nothing either way.
   */
  readonly promptMs: number;
}

/** Postfix's `initial_destination_concurrency`. */
export const INITIAL_WINDOW = 5;

export function windowPolicy(options: { smtpMaxConnections: number; smtpTimeoutMs: number }): WindowPolicy {
  return {
    initial: Math.min(INITIAL_WINDOW, options.smtpMaxConnections),
    ceiling: options.smtpMaxConnections,
    // A quarter of the transaction deadline: a relay that slow is near the point of timing out.
    promptMs: options.smtpTimeoutMs / 4,
  };
}

export interface RelayWindow {
  /** Transactions allowed in flight; fractional while it grows by 1/limit per acceptance. */
  readonly limit: number;
  /** Below it the window grows by one per acceptance (doubling per round); half the window at the last cut. */
  readonly threshold: number;
  /** Counts the cuts; a transaction carries the round it started in. */
  readonly round: number;
}

export function openWindow(policy: WindowPolicy): RelayWindow {
  return { limit: policy.initial, threshold: policy.ceiling, round: 0 };
}

/** Transactions that may be in flight to the relay now. */
export function windowSize(window: RelayWindow): number {
  return Math.max(1, Math.floor(window.limit));
}

export type RelaySignal = 'accepted' | 'congested' | 'neutral';

/** What one finished SMTP transaction tells about the relay, as the SMTP adapter reported it. */
export interface TransactionFacts {
  readonly ok: boolean;
  /** The relay's reply code; null when none came (connection refused, reset, timed out). */
  readonly smtpCode: number | null;
  /** The reply or error text, for its enhanced status code. */
  readonly reply: string;
  /** Failures only: whether another attempt may succeed. */
  readonly transient: boolean;
  readonly durationMs: number;
}

export function relaySignal(facts: TransactionFacts, policy: WindowPolicy): RelaySignal {
  if (facts.ok) return facts.durationMs <= policy.promptMs ? 'accepted' : 'neutral';
  // A permanent failure without a reply is Herald's own verdict (an outbound rule, not an SMTP
  // server), and other replies are about the message (550 5.1.1, 452 4.2.2 mailbox full).
  if (facts.smtpCode === null) return facts.transient ? 'congested' : 'neutral';
  if (facts.smtpCode === 421) return 'congested';
  if (facts.smtpCode >= 400 && facts.smtpCode < 500 && enhancedStatusIn(facts.reply)?.startsWith('4.7.'))
    return 'congested';
  return 'neutral';
}

export interface Finished {
  readonly signal: RelaySignal;
  /** The window's round when the transaction started. */
  readonly round: number;
  /** Transactions in flight to the relay when it finished, its own included. */
  readonly inFlight: number;
}

export function nextWindow(window: RelayWindow, finished: Finished, policy: WindowPolicy): RelayWindow {
  switch (finished.signal) {
    case 'accepted': {
      // Only a full window is evidence of room: a relay taking one message at a time says
      // nothing about twenty.
      if (finished.inFlight < windowSize(window) || window.limit >= policy.ceiling) return window;
      const step = window.limit < window.threshold ? 1 : 1 / window.limit;
      return { ...window, limit: Math.min(policy.ceiling, window.limit + step) };
    }
    case 'congested': {
      if (finished.round < window.round) return window;
      const limit = Math.max(1, Math.floor(window.limit / 2));
      return { limit, threshold: limit, round: window.round + 1 };
    }
    case 'neutral':
      return window;
  }
}

/**
 * The window of a relay that was down and is back (relay-health.ts): one transaction, doubling
 * per round of prompt acceptances up to `initial`, then growing by one per window, as a TCP
 * sender restarts after a timeout. The mail that waited for the relay is due at once; this keeps
 * it from arriving as one burst that trips the relay's own limits. The new round leaves failures
 * of transactions started while it was down without effect on it.
 */
export function reopenWindow(window: RelayWindow, policy: WindowPolicy): RelayWindow {
  return { limit: 1, threshold: Math.min(policy.initial, policy.ceiling), round: window.round + 1 };
}
