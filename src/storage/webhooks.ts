import type { Insertable, Kysely } from 'kysely';
import type {
  Database,
  WebhookAttemptRow,
  WebhookAttemptsTable,
  WebhookDeliveryRow,
  WebhookEndpointRow,
} from './schema.js';
import { deleteRows, findRow, listRows, rowsIn, updateRow } from './rows.js';

export async function insertEndpoint(
  db: Kysely<Database>,
  row: { project_id: number; url: string; events: string | null; secret_enc: string; now: number },
): Promise<WebhookEndpointRow> {
  return db
    .insertInto('webhook_endpoints')
    .values({
      project_id: row.project_id,
      url: row.url,
      events: row.events,
      secret_enc: row.secret_enc,
      enabled: 1,
      created_at: row.now,
      updated_at: row.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listEndpoints(db: Kysely<Database>, projectId: number): Promise<WebhookEndpointRow[]> {
  return listRows(db, 'webhook_endpoints', { project_id: projectId }, 'id');
}

/** One endpoint, only if it belongs to the project: ids from a URL or the CLI never cross tenants. */
export async function findEndpoint(
  db: Kysely<Database>,
  projectId: number,
  id: number,
): Promise<WebhookEndpointRow | undefined> {
  return findRow(db, 'webhook_endpoints', { id, project_id: projectId });
}

/** Endpoints by id for the webhook consumer (any project: it serves them all). */
export async function endpointsById(
  db: Kysely<Database>,
  ids: readonly number[],
): Promise<WebhookEndpointRow[]> {
  return rowsIn(db, 'webhook_endpoints', 'id', ids);
}

export async function setEndpointEnabled(
  db: Kysely<Database>,
  projectId: number,
  id: number,
  enabled: boolean,
  now: number,
): Promise<boolean> {
  const changes = { enabled: enabled ? 1 : 0, updated_at: now };
  return (await updateRow(db, 'webhook_endpoints', { id, project_id: projectId }, changes)) !== undefined;
}

/** Deletes an endpoint with its deliveries and their attempts (ON DELETE CASCADE). */
export async function deleteEndpoint(db: Kysely<Database>, projectId: number, id: number): Promise<boolean> {
  return deleteRows(db, 'webhook_endpoints', { id, project_id: projectId });
}

/**
 * Enabled endpoints with deliveries due, the longest-waiting first: the webhook consumer claims per
 * endpoint, so one endpoint's backlog cannot fill every lane. Each endpoint's earliest pending
 * delivery is one seek of the due index (`endpoint_id, run_at` of pending rows), so a claim costs
 * the same however many deliveries a receiver that is down has piled up.
 */
export async function dueEndpoints(
  db: Kysely<Database>,
  now: number,
  exclude: { readonly endpoints: readonly number[]; readonly projects: readonly number[] },
  limit: number,
): Promise<number[]> {
  const earliest = db
    .selectFrom('webhook_endpoints as e')
    .select((eb) => [
      'e.id as endpoint_id',
      eb
        .selectFrom('webhook_deliveries as d')
        .select('d.run_at')
        .whereRef('d.endpoint_id', '=', 'e.id')
        .where('d.state', '=', 'pending')
        .orderBy('d.run_at')
        .limit(1)
        .as('due'),
    ])
    .where('e.enabled', '=', 1)
    .$if(exclude.endpoints.length > 0, (qb) => qb.where('e.id', 'not in', exclude.endpoints))
    .$if(exclude.projects.length > 0, (qb) => qb.where('e.project_id', 'not in', exclude.projects));
  const rows = await db
    .selectFrom(earliest.as('endpoints'))
    .select('endpoint_id')
    .where('due', '<=', now)
    .orderBy('due')
    .limit(limit)
    .execute();
  return rows.map((row) => row.endpoint_id);
}

/** The body of each event, by event id. */
export async function eventsById(
  db: Kysely<Database>,
  ids: readonly number[],
): Promise<Map<number, { webhook_id: string; type: string; payload: string }>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhook_events')
    .select(['id', 'webhook_id', 'type', 'payload'])
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

export async function insertWebhookAttempt(
  db: Kysely<Database>,
  row: Insertable<WebhookAttemptsTable>,
): Promise<void> {
  await db.insertInto('webhook_attempts').values(row).execute();
}

/** A new pending delivery of an event already delivered (or not) to an endpoint: same webhook-id. */
export async function insertReplay(
  db: Kysely<Database>,
  from: WebhookDeliveryRow,
  now: number,
): Promise<WebhookDeliveryRow> {
  return db
    .insertInto('webhook_deliveries')
    .values({
      event_id: from.event_id,
      endpoint_id: from.endpoint_id,
      project_id: from.project_id,
      state: 'pending',
      attempts: 0,
      run_at: now,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface DeliveryListRow extends WebhookDeliveryRow {
  readonly type: string;
  readonly webhook_id: string;
  readonly notification_id: number | null;
  readonly request_id: string | null;
}

/** An endpoint's deliveries, newest first, `before` an id for the next page. */
export async function listDeliveries(
  db: Kysely<Database>,
  endpointId: number,
  options: { readonly limit: number; readonly before?: number },
): Promise<DeliveryListRow[]> {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as ev', 'ev.id', 'd.event_id')
    .leftJoin('notifications as n', 'n.id', 'ev.notification_id')
    .selectAll('d')
    .select(['ev.type', 'ev.webhook_id', 'ev.notification_id', 'n.request_id'])
    .where('d.endpoint_id', '=', endpointId)
    .$if(options.before !== undefined, (qb) => qb.where('d.id', '<', options.before!))
    .orderBy('d.id', 'desc')
    .limit(options.limit)
    .execute();
}

export async function findDelivery(
  db: Kysely<Database>,
  endpointId: number,
  id: number,
): Promise<(DeliveryListRow & { readonly payload: string }) | undefined> {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as ev', 'ev.id', 'd.event_id')
    .leftJoin('notifications as n', 'n.id', 'ev.notification_id')
    .selectAll('d')
    .select(['ev.type', 'ev.webhook_id', 'ev.notification_id', 'ev.payload', 'n.request_id'])
    .where('d.endpoint_id', '=', endpointId)
    .where('d.id', '=', id)
    .executeTakeFirst();
}

export async function listWebhookAttempts(
  db: Kysely<Database>,
  deliveryIds: readonly number[],
): Promise<WebhookAttemptRow[]> {
  return rowsIn(db, 'webhook_attempts', 'delivery_id', deliveryIds, 'delivery_id', 'attempt');
}

/**
 * Deletes up to `limit` events older than `before` whose deliveries have all finished, with their
 * deliveries and attempts (ON DELETE CASCADE). Returns how many events were deleted.
 */
export async function pruneWebhookHistory(
  db: Kysely<Database>,
  before: number,
  limit: number,
): Promise<number> {
  const result = await db
    .deleteFrom('webhook_events')
    .where('id', 'in', (qb) =>
      qb
        .selectFrom('webhook_events as ev')
        .select('ev.id')
        .where('ev.created_at', '<', before)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('webhook_deliveries as d')
                .select('d.id')
                .whereRef('d.event_id', '=', 'ev.id')
                .where('d.state', 'in', ['pending', 'sending']),
            ),
          ),
        )
        .orderBy('ev.id')
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
