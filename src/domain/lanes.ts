/**
 * How a worker's lanes (concurrent SMTP transactions) are shared between relays (product.md §8:
 * one relay's trouble never stalls another project's mail). A relay holds at most its window
 * (relay-window.ts), never more than `perRelay` lanes (its connection ceiling) and never the
 * `reserved` quarter. The reserved lanes go only to relays that hold none, one each: an idle
 * relay's mail finds a lane unless, besides the relays filling the rest, more relays stall at once
 * than there are reserved lanes (13 of the default 50); even then it waits at most one
 * transaction deadline (HERALD_SMTP_TIMEOUT_MS).
 */
export interface LanePolicy {
  readonly concurrency: number;
  readonly perRelay: number;
  readonly reserved: number;
}

export function lanePolicy(options: { concurrency: number; smtpMaxConnections: number }): LanePolicy {
  const reserved = Math.ceil(options.concurrency / 4);
  return {
    concurrency: options.concurrency,
    perRelay: Math.max(1, Math.min(options.smtpMaxConnections, options.concurrency - reserved)),
    reserved,
  };
}

/**
 * Whether a message for a relay that holds `busy` lanes and may have `window` transactions in
 * flight may go on in the lane it has, with `active` lanes in use in all (its own included).
 */
export function mayUseLane(
  policy: LanePolicy,
  busy: number,
  active: number,
  window: number = policy.perRelay,
): boolean {
  if (busy >= Math.min(policy.perRelay, window)) return false;
  return busy === 0 || policy.concurrency - active >= policy.reserved;
}
