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
 * An endpoint's event filter from a comma-separated list (`--events a,b`) or a list of names (an
 * empty list: every event); null means every event. Throws a message naming the unknown event and the known ones.
 */
export function parseEventFilter(input: string | readonly string[] | undefined): NotificationEvent[] | null {
  if (input === undefined) return null;
  const names = (typeof input === 'string' ? input.split(',') : input).map((n) => n.trim()).filter(Boolean);
  if (names.length === 0) {
    // No box ticked means every event; a list typed but empty (`--events ","`) is a mistake.
    if (typeof input !== 'string') return null;
    throw new Error(`No events named; events are ${NOTIFICATION_EVENTS.join(', ')}`);
  }
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

/** The delay before webhook attempt `attempt + 1`, given that `attempt` (≥ 1) attempts were made. */
export function webhookRetryDelay(
  attempt: number,
  baseMs: number,
  random: () => number = Math.random,
): number {
  // Doubling from the base, capped at six hours; the jitter only lengthens a delay (×[1, 1.2)), so
  // the documented schedule is a lower bound: with the defaults retries span at least 29 hours.
  const ceiling = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), WEBHOOK_MAX_DELAY_MS);
  return Math.round(ceiling * (1 + random() * 0.2));
}

export const WEBHOOK_MAX_DELAY_MS = 6 * 3_600_000;
