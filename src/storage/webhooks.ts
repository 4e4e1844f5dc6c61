import { sql, type Insertable, type Kysely } from 'kysely';
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
 * endpoint, so one endpoint's backlog cannot fill every lane. Both steps walk the due index
 * (`endpoint_id, run_at` of pending rows): the endpoints that have pending deliveries, one seek
 * each from the last (a loose index scan), then each one's earliest. A claim costs as many seeks as
 * endpoints with deliveries waiting, however many deliveries wait behind a receiver that is down,
 * and however many endpoints have none.
 */
export async function dueEndpoints(
  db: Kysely<Database>,
  now: number,
  exclude: { readonly endpoints: readonly number[]; readonly projects: readonly number[] },
  limit: number,
): Promise<number[]> {
  const notIn = (column: string, ids: readonly number[]) =>
    ids.length === 0 ? sql`` : sql`AND ${sql.ref(column)} NOT IN (${sql.join(ids)})`;
  const { rows } = await sql<{ endpoint_id: number }>`
    WITH RECURSIVE waiting (endpoint_id) AS (
      SELECT MIN(endpoint_id) FROM webhook_deliveries WHERE state = 'pending'
      UNION ALL
      SELECT (
        SELECT MIN(d.endpoint_id) FROM webhook_deliveries d
        WHERE d.state = 'pending' AND d.endpoint_id > w.endpoint_id
      )
      FROM waiting w WHERE w.endpoint_id IS NOT NULL
    ),
    earliest AS MATERIALIZED (
      SELECT w.endpoint_id, (
        SELECT MIN(d.run_at) FROM webhook_deliveries d
        WHERE d.endpoint_id = w.endpoint_id AND d.state = 'pending'
      ) AS due
      FROM waiting w WHERE w.endpoint_id IS NOT NULL
    )
    SELECT earliest.endpoint_id FROM earliest
    JOIN webhook_endpoints e ON e.id = earliest.endpoint_id
    WHERE e.enabled = 1 AND earliest.due <= ${now}
      ${notIn('e.id', exclude.endpoints)} ${notIn('e.project_id', exclude.projects)}
    ORDER BY earliest.due
    LIMIT ${limit}
  `.execute(db);
  return rows.map((row) => Number(row.endpoint_id));
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

/** When the earliest pending delivery to an endpoint is due, or null when none is pending. */
export async function earliestPending(db: Kysely<Database>, endpointId: number): Promise<number | null> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select((eb) => eb.fn.min('run_at').as('due'))
    .where('endpoint_id', '=', endpointId)
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return row?.due == null ? null : Number(row.due);
}

/**
 * Whether an event of `type` has yet to be answered once by an endpoint: queued and never tried,
 * or on its first call now (a claim counts the attempt). One that has been tried and waits to be
 * tried again is an ordinary retry, and does not count.
 */
export async function hasUntriedOfType(
  db: Kysely<Database>,
  endpointId: number,
  type: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as ev', 'ev.id', 'd.event_id')
    .select('d.id')
    .where('d.endpoint_id', '=', endpointId)
    .where('ev.type', '=', type)
    .where((eb) =>
      eb.or([
        eb.and([eb('d.state', '=', 'pending'), eb('d.attempts', '=', 0)]),
        eb.and([eb('d.state', '=', 'sending'), eb('d.attempts', '=', 1)]),
      ]),
    )
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
