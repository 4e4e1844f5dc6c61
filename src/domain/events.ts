import { backoffDelay, type Backoff } from './backoff.js';

/**
 * The events Herald reports (product.md §5). Names are fixed: receivers switch on them.
 */
export const NOTIFICATION_EVENTS = [
  'notification.sent',
  'notification.deferred',
  'notification.failed',
  'notification.bounced',
  'notification.complained',
] as const;

export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

/** Sent only by "Send test event", to one endpoint, whatever its event filter. */
export const TEST_EVENT = 'webhook.test';

export type EventType = NotificationEvent | typeof TEST_EVENT;

export function isNotificationEvent(name: string): name is NotificationEvent {
  return (NOTIFICATION_EVENTS as readonly string[]).includes(name);
}

/**
 * An endpoint's event filter from a comma-separated list (`--events a,b`) or a list of names; none
 * given (undefined) means every event, returned as null. A list given but empty (`--events ","`,
 * `"events": []`) is a mistake, not every event: it throws, as an unknown event does, with a
 * message naming the known ones. (The dashboard gives none when no box is ticked.)
 */
export function parseEventFilter(input: string | readonly string[] | undefined): NotificationEvent[] | null {
  if (input === undefined) return null;
  const names = (typeof input === 'string' ? input.split(',') : input).map((n) => n.trim()).filter(Boolean);
  if (names.length === 0) throw new Error(`No events named; events are ${NOTIFICATION_EVENTS.join(', ')}`);
  const unknown = names.find((name) => !isNotificationEvent(name));
  if (unknown !== undefined)
    throw new Error(`Unknown event ${JSON.stringify(unknown)}; events are ${NOTIFICATION_EVENTS.join(', ')}`);
  const chosen = new Set(names);
  // Every event named is the same as no filter; stored as null so events added later are included.
  if (NOTIFICATION_EVENTS.every((name) => chosen.has(name))) return null;
  return NOTIFICATION_EVENTS.filter((name) => chosen.has(name));
}

/** Whether an endpoint with this filter receives an event of this type. */
export function wantsEvent(filter: readonly string[] | null, type: string): boolean {
  return filter === null || filter.includes(type);
}

/** Where a webhook delivery goes after an attempt (product.md §5). */
export interface WebhookAttempted {
  readonly state: 'succeeded' | 'failed' | 'pending';
  /** When the next attempt is due (unchanged once it is final). */
  readonly runAt: number;
}

/**
 * A delivery's attempt `attempt` (counted from 1) answered 2xx or not: any 2xx is success;
 * anything else is retried with backoff until `maxAttempts` attempts were made, then it failed.
 */
export function webhookAttempted(
  delivery: { readonly attempts: number; readonly run_at: number },
  ok: boolean,
  policy: { readonly maxAttempts: number; readonly backoff: Backoff },
  now: number,
  random: () => number = Math.random,
): WebhookAttempted {
  if (ok) return { state: 'succeeded', runAt: delivery.run_at };
  if (delivery.attempts >= policy.maxAttempts) return { state: 'failed', runAt: delivery.run_at };
  return { state: 'pending', runAt: now + backoffDelay(delivery.attempts, policy.backoff, random) };
}
