/**
 * How a worker's lanes (concurrent SMTP transactions) are shared between relays (product.md §8:
 * one relay's trouble never stalls another project's mail). A relay holds at most `perRelay`
 * lanes: twice its pooled connections (each connection has the next message waiting in the pool
 * when it finishes one, so none idles between messages; more would only queue) and never the
 * `reserved` quarter. The reserved lanes go only to relays that hold none, one each: an idle
 * relay's mail finds a lane unless, besides the relays filling the rest, more relays stall at once
 * than there are reserved lanes (5 of the default 20); even then it waits at most one
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
    perRelay: Math.max(1, Math.min(2 * options.smtpMaxConnections, options.concurrency - reserved)),
    reserved,
  };
}

/**
 * Whether a message for a relay that holds `busy` lanes may go on in the lane it has, with
 * `active` lanes in use in all (its own included).
 */
export function mayUseLane(policy: LanePolicy, busy: number, active: number): boolean {
  if (busy >= policy.perRelay) return false;
  return busy === 0 || policy.concurrency - active >= policy.reserved;
}
