import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { wantsEvent, type EventType } from '../domain/events.js';
import type { Database } from './schema.js';

/** An event to report, as the code that changed the state describes it. */
export interface OutboxEvent {
  readonly projectId: number;
  readonly notificationId: number | null;
  readonly type: EventType;
  /**
   * The body's `data` without `project` (added here from the project's name), built only for an
   * event some endpoint wants: most state changes of most projects are reported to none.
   */
  readonly data: () => Readonly<Record<string, unknown>>;
  readonly at: number;
  /** Only this endpoint, whatever its filter (a test event); otherwise every enabled endpoint that wants it. */
  readonly endpointId?: number;
  /** When its deliveries are due, if not at `at` (a test event's goes ahead of its endpoint's others). */
  readonly runAt?: number;
}

/** Rows per INSERT: well under both backends' parameter limits. */
const CHUNK = 500;

/** A Standard Webhooks message id: opaque, unique, the same on every retry and endpoint. */
export function newWebhookId(): string {
  return `msg_${randomBytes(16).toString('base64url')}`;
}

/**
 * The outbox: writes the events and one pending delivery per endpoint that wants each, in the
 * caller's transaction, so an event exists exactly when the state change it reports was committed.
 * An event no enabled endpoint wants is not stored at all. Returns how many deliveries it created.
 */
export async function recordEvents(tx: Kysely<Database>, events: readonly OutboxEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const projectIds = [...new Set(events.map((event) => event.projectId))];
  const endpoints = await tx
    .selectFrom('webhook_endpoints')
    .select(['id', 'project_id', 'events', 'enabled'])
    .where('project_id', 'in', projectIds)
    .execute();
  if (endpoints.length === 0) return 0;
  const filters = new Map(
    endpoints.map((e) => [e.id, e.events === null ? null : (JSON.parse(e.events) as string[])]),
  );
  const targets = events.map((event) =>
    endpoints
      .filter((e) =>
        event.endpointId !== undefined
          ? e.id === event.endpointId
          : e.project_id === event.projectId && e.enabled === 1 && wantsEvent(filters.get(e.id)!, event.type),
      )
      .map((e) => e.id),
  );
  const wanted = events.flatMap((event, i) =>
    targets[i]!.length > 0 ? [{ event, endpoints: targets[i]! }] : [],
  );
  if (wanted.length === 0) return 0;
  const names = new Map(
    (
      await tx
        .selectFrom('projects')
        .select(['id', 'name'])
        .where('id', 'in', [...new Set(wanted.map((w) => w.event.projectId))])
        .execute()
    ).map((p) => [p.id, p.name]),
  );
  let created = 0;
  for (let start = 0; start < wanted.length; start += CHUNK) {
    const chunk = wanted.slice(start, start + CHUNK).map((w) => ({ ...w, webhookId: newWebhookId() }));
    const inserted = await tx
      .insertInto('webhook_events')
      .values(
        chunk.map(({ event, webhookId }) => ({
          project_id: event.projectId,
          notification_id: event.notificationId,
          webhook_id: webhookId,
          type: event.type,
          payload: JSON.stringify({
            type: event.type,
            timestamp: new Date(event.at).toISOString(),
            data: { ...event.data(), project: names.get(event.projectId) ?? null },
          }),
          created_at: event.at,
        })),
      )
      .returning(['id', 'webhook_id'])
      .execute();
    const ids = new Map(inserted.map((row) => [row.webhook_id, row.id]));
    const deliveries = chunk.flatMap(({ event, endpoints: ids_, webhookId }) =>
      ids_.map((endpointId) => ({
        event_id: ids.get(webhookId)!,
        endpoint_id: endpointId,
        project_id: event.projectId,
        state: 'pending' as const,
        attempts: 0,
        run_at: event.runAt ?? event.at,
        created_at: event.at,
        updated_at: event.at,
      })),
    );
    for (let from = 0; from < deliveries.length; from += CHUNK)
      await tx
        .insertInto('webhook_deliveries')
        .values(deliveries.slice(from, from + CHUNK))
        .execute();
    created += deliveries.length;
  }
  return created;
}
