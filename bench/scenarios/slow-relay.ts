/**
 * Figure 7, delivery through a slow relay: smtp-sink answers each DATA command after one second,
 * like a relay across the internet, so throughput is a matter of how many transactions are in
 * flight at once, not of CPU. Herald runs with its default settings (its window per relay has to
 * find the relay's room by itself); the baseline is smtp-source with 20 parallel sessions into a
 * sink of the same kind, Postfix's default destination concurrency limit.
 */
import type { Context, DeliveryResult } from '../lib/results.js';
import { runDelivery } from './delivery.js';

export const SLOW_RELAY_DELAY_S = 1;
export const SLOW_RELAY_SESSIONS = 20;

export function runSlowRelay(
  ctx: Context,
  out: DeliveryResult,
  problem: (message: string) => void,
): Promise<void> {
  out.relayDelayS = SLOW_RELAY_DELAY_S;
  return runDelivery(ctx, out, problem, {
    name: 'slow-relay',
    delayS: SLOW_RELAY_DELAY_S,
    // Bounded even for a worker that keeps only 4 transactions in flight.
    timeoutS: Math.ceil(out.count / 4) + 30,
  });
}
