/**
 * How a worker's lanes (concurrent SMTP transactions) are shared between relays (product.md §8:
 * one relay's trouble never stalls another project's mail). A relay holds at most `perRelay`
 * lanes: no more than its pooled connections (more would only queue inside the pool) and never
 * the `reserved` quarter. The reserved lanes go only to relays that hold none: however many
 * relays stall at once, the mail of a relay that is idle finds a lane.
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
 * Whether a message for a relay that holds `busy` lanes may go on in the lane it has, with
 * `active` lanes in use in all (its own included).
 */
export function mayUseLane(policy: LanePolicy, busy: number, active: number): boolean {
  if (busy >= policy.perRelay) return false;
  return busy === 0 || policy.concurrency - active >= policy.reserved;
}
