import { sql, type Kysely } from 'kysely';
import type { MetadataFilter } from '../domain/metadata.js';
import { insertRows } from './bulk-insert.js';
import { hasMetadata } from './notification-metadata.js';
import type { Database, NewNotificationRow, NotificationRow, NotificationState } from './schema.js';
import { findRow } from './rows.js';

/**
 * Inserts many rows, in statements of at most INSERT_CHUNK rows, and returns their ids by
 * request_id (RETURNING promises no order, so rows are matched by their unique request id).
 */
export async function insertNotifications(
  db: Kysely<Database>,
  rows: readonly NewNotificationRow[],
): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  // A group of batches can hold thousands of rows; chunks keep each statement's parameters well
  // under both backends' limits (SQLite 32,766, PostgreSQL 65,535).
  for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
    const chunk = rows.length <= INSERT_CHUNK ? rows : rows.slice(start, start + INSERT_CHUNK);
    const inserted = await insertRows<{ id: number; request_id: string }>(db, 'notifications', chunk, [
      'id',
      'request_id',
    ]);
    for (const row of inserted) ids.set(row.request_id, row.id);
  }
  return ids;
}

const INSERT_CHUNK = 500;

export async function findNotification(
  db: Kysely<Database>,
  requestId: string,
  projectId?: number,
): Promise<NotificationRow | undefined> {
  let query = db.selectFrom('notifications').selectAll().where('request_id', '=', requestId);
  if (projectId !== undefined) query = query.where('project_id', '=', projectId);
  return query.executeTakeFirst();
}

/**
 * Erases the placeholder values and rendered content of up to `limit` notifications that finished
 * (sent or failed) before `before`, oldest first. Metadata, attempts and replies stay. Returns how
 * many were erased.
 */
export async function eraseFinishedContent(
  db: Kysely<Database>,
  { before, now, limit }: { before: number; now: number; limit: number },
): Promise<number> {
  const result = await db
    .updateTable('notifications')
    .set({ data: '{}', subject: null, text_body: null, html_body: null, content_erased_at: now })
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('notifications')
        .select('id')
        .where('content_erased_at', 'is', null)
        .where('state', 'in', ['sent', 'failed'])
        .where('updated_at', '<', before)
        .orderBy('updated_at')
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export async function countByState(
  db: Kysely<Database>,
  projectId?: number,
): Promise<Record<NotificationState, number>> {
  let query = db
    .selectFrom('notifications')
    .select(['state', (eb) => eb.fn.countAll<number>().as('count')])
    .groupBy('state');
  if (projectId !== undefined) query = query.where('project_id', '=', projectId);
  const counts: Record<NotificationState, number> = { queued: 0, sending: 0, sent: 0, failed: 0 };
  for (const row of await query.execute()) counts[row.state] = Number(row.count);
  return counts;
}

export interface NotificationFilter {
  readonly projectId?: number;
  readonly state?: NotificationState;
  /** Any of these states (the public `queued` is `queued` or `sending`). */
  readonly states?: readonly NotificationState[];
  /** Only messages with exactly this error (`Canceled`: the failed that were canceled). */
  readonly errorMessage?: string;
  readonly template?: string;
  readonly recipient?: string;
  /** Messages whose metadata has every one of these values. */
  readonly metadata?: readonly MetadataFilter[];
  readonly from?: number;
  readonly to?: number;
  /** Keyset pagination: rows with an id below this one. */
  readonly beforeId?: number;
  /** Rows with an id at or above this one: bounds how far back one page of a search looks. */
  readonly fromId?: number;
  readonly limit: number;
}

export async function listNotifications(
  db: Kysely<Database>,
  filter: NotificationFilter,
): Promise<NotificationRow[]> {
  let query = db.selectFrom('notifications').selectAll();
  if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
  if (filter.state !== undefined) query = query.where('state', '=', filter.state);
  if (filter.states !== undefined) query = query.where('state', 'in', filter.states);
  if (filter.errorMessage !== undefined) query = query.where('error_message', '=', filter.errorMessage);
  if (filter.template !== undefined) query = query.where('template', '=', filter.template);
  if (filter.recipient !== undefined)
    query = query.where(sql<boolean>`recipient like ${`%${escapeLike(filter.recipient)}%`} escape '\\'`);
  if (filter.metadata !== undefined && filter.metadata.length > 0)
    query = query.where(hasMetadata(filter.metadata, filter.projectId));
  if (filter.from !== undefined) query = query.where('created_at', '>=', filter.from);
  if (filter.to !== undefined) query = query.where('created_at', '<', filter.to);
  if (filter.beforeId !== undefined) query = query.where('id', '<', filter.beforeId);
  if (filter.fromId !== undefined) query = query.where('id', '>=', filter.fromId);
  return query.orderBy('id', 'desc').limit(filter.limit).execute();
}

/** The newest notification id (0 when there is none): one look at the primary key. */
export async function newestNotificationId(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('notifications')
    .select((eb) => eb.fn.max('id').as('id'))
    .executeTakeFirst();
  return row?.id == null ? 0 : Number(row.id);
}

/** A search's own `%`, `_` and `\` as literal characters, under `escape '\'` (SQLite has no default). */
function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

export async function findNotificationById(
  db: Kysely<Database>,
  id: number,
): Promise<NotificationRow | undefined> {
  return findRow(db, 'notifications', { id });
}

/**
 * How many of a project's notifications are still to be sent (queued, or in an SMTP transaction
 * now). One count per state, so each reads its state's partial index (the claim's and the lease
 * reaper's), never the project's whole history.
 */
export async function countWaiting(db: Kysely<Database>, projectId: number): Promise<number> {
  let waiting = 0;
  for (const state of ['queued', 'sending'] as const) {
    const row = await db
      .selectFrom('notifications')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('state', '=', state)
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    waiting += Number(row.n);
  }
  return waiting;
}
