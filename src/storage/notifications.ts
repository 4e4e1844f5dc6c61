import type { Kysely } from 'kysely';
import { Precompiled } from './precompiled.js';
import type { Database, NewNotificationRow, NotificationRow, NotificationState } from './schema.js';
import type { UsageDeltaRow } from './usage.js';

/**
 * Inserts many rows in one statement and returns their ids by request_id (RETURNING promises no
 * order, so rows are matched by their unique request id).
 */
export async function insertNotifications(
  db: Kysely<Database>,
  rows: readonly NewNotificationRow[],
): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  // A group of batches can hold thousands of rows; chunks keep each statement's parameters well
  // under both backends' limits (SQLite 32,766, PostgreSQL 65,535).
  for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
    const inserted = await db
      .insertInto('notifications')
      .values(rows.slice(start, start + INSERT_CHUNK))
      .returning(['id', 'request_id'])
      .execute();
    for (const row of inserted) ids.set(row.request_id, row.id);
  }
  return ids;
}

const INSERT_CHUNK = 500;

/**
 * Inserts accepted rows and their usage deltas with one statement, a PostgreSQL data-modifying
 * WITH: one round trip instead of a transaction's four (BEGIN, two inserts, COMMIT), and atomic
 * on its own, so the caller needs no transaction. Undefined when the rows do not fit in one
 * statement (the caller then inserts them in a transaction, in chunks).
 */
export async function insertQueuedInOneStatement(
  db: Kysely<Database>,
  rows: readonly NewNotificationRow[],
  usage: readonly UsageDeltaRow[],
): Promise<Map<string, number> | undefined> {
  if (rows.length === 0 || rows.length > INSERT_CHUNK || usage.length === 0) return undefined;
  const inserted = await db
    .with('counted', (qb) => qb.insertInto('usage_deltas').values(usage))
    .with('inserted', (qb) => qb.insertInto('notifications').values(rows).returning(['id', 'request_id']))
    .selectFrom('inserted')
    .select(['id', 'request_id'])
    .execute();
  return new Map(inserted.map((row) => [row.request_id, row.id]));
}

/**
 * Cancels a notification that waits in the queue (product.md §6). One conditional UPDATE: a worker
 * that claimed the row first has moved it to `sending`, so exactly one of the two wins.
 */
export async function cancelQueued(
  db: Kysely<Database>,
  requestId: string,
  projectId: number,
  now: number,
): Promise<NotificationRow | undefined> {
  return db
    .updateTable('notifications')
    .set({ state: 'failed', error_message: 'Canceled', updated_at: now })
    .where('request_id', '=', requestId)
    .where('project_id', '=', projectId)
    .where('state', '=', 'queued')
    .returningAll()
    .executeTakeFirst();
}

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
 * What a finished attempt writes to its notification. Every column is written (those the outcome
 * leaves alone with the row's current values), so the statement has one shape.
 */
export type FinishedColumns = Pick<
  NotificationRow,
  | 'state'
  | 'run_at'
  | 'sent_at'
  | 'error_message'
  | 'transport'
  | 'message_id'
  | 'subject'
  | 'text_body'
  | 'html_body'
  | 'updated_at'
>;

const FINISH_DELIVERY = new Precompiled(
  [
    'id',
    'owner',
    'state',
    'run_at',
    'sent_at',
    'error_message',
    'transport',
    'message_id',
    'subject',
    'text_body',
    'html_body',
    'updated_at',
  ] as const,
  (db, slot) =>
    db
      .updateTable('notifications')
      .set({
        state: slot('state'),
        run_at: slot('run_at'),
        sent_at: slot('sent_at'),
        error_message: slot('error_message'),
        transport: slot('transport'),
        message_id: slot('message_id'),
        subject: slot('subject'),
        text_body: slot('text_body'),
        html_body: slot('html_body'),
        updated_at: slot('updated_at'),
        lease_owner: null,
        lease_until: null,
      })
      .where('id', '=', slot('id'))
      .where('state', '=', 'sending')
      .where('lease_owner', '=', slot('owner')),
);

/**
 * Records the outcome of a delivery attempt, but only while this worker still holds the lease: a
 * worker whose lease expired (and whose message another worker reclaimed) must not overwrite it.
 * Runs once per attempt, so its SQL is built once (see precompiled.ts).
 */
export async function finishDelivery(
  db: Kysely<Database>,
  id: number,
  owner: string,
  columns: FinishedColumns,
): Promise<boolean> {
  const result = await FINISH_DELIVERY.run(db, { ...columns, id, owner });
  return (result.numAffectedRows ?? 0n) > 0n;
}

/**
 * Puts claimed messages back in the queue without counting an attempt (a graceful stop releasing
 * work it had not started).
 */
export async function releaseClaims(
  db: Kysely<Database>,
  ids: readonly number[],
  owner: string,
  now: number,
): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('notifications')
    .set((eb) => ({
      state: 'queued',
      lease_owner: null,
      lease_until: null,
      attempts: eb('attempts', '-', 1),
      updated_at: now,
    }))
    .where('id', 'in', ids)
    .where('state', '=', 'sending')
    .where('lease_owner', '=', owner)
    .execute();
}

/**
 * Returns messages (and webhook deliveries) whose worker died (lease expired) to the queue. The attempt it counted stays
 * counted: the message may or may not have reached the relay.
 */
export async function reclaimExpiredLeases(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db
    .updateTable('notifications')
    .set({ state: 'queued', lease_owner: null, lease_until: null, run_at: now, updated_at: now })
    .where('state', '=', 'sending')
    .where('lease_until', '<', now)
    .executeTakeFirst();
  const hooks = await db
    .updateTable('webhook_deliveries')
    .set({ state: 'pending', lease_owner: null, lease_until: null, run_at: now, updated_at: now })
    .where('state', '=', 'sending')
    .where('lease_until', '<', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) + Number(hooks.numUpdatedRows);
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

/**
 * The earliest time a queued message becomes due (after `after`, when given), so a worker knows
 * when to look again.
 */
export async function nextDueAt(db: Kysely<Database>, after?: number): Promise<number | null> {
  const row = await db
    .selectFrom('notifications')
    .select((eb) => eb.fn.min('run_at').as('next'))
    .where('state', '=', 'queued')
    .$if(after !== undefined, (qb) => qb.where('run_at', '>', after!))
    .executeTakeFirst();
  return row?.next == null ? null : Number(row.next);
}

export interface NotificationFilter {
  readonly projectId?: number;
  readonly state?: NotificationState;
  readonly template?: string;
  readonly recipient?: string;
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
  if (filter.template !== undefined) query = query.where('template', '=', filter.template);
  if (filter.recipient !== undefined)
    query = query.where('recipient', 'like', `%${escapeLike(filter.recipient)}%`);
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

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

export async function findNotificationById(
  db: Kysely<Database>,
  id: number,
): Promise<NotificationRow | undefined> {
  return db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * A hard bounce reported after delivery: a `sent` message turns `failed`. Conditional on the
 * state, so a second report of the same bounce changes nothing.
 */
export async function markBounced(
  db: Kysely<Database>,
  id: number,
  errorMessage: string,
  now: number,
): Promise<NotificationRow | undefined> {
  return db
    .updateTable('notifications')
    .set({ state: 'failed', error_message: errorMessage, bounced_at: now, updated_at: now })
    .where('id', '=', id)
    .where('state', '=', 'sent')
    .returningAll()
    .executeTakeFirst();
}

/** Records that a complaint arrived; false when one had already been recorded. */
export async function markComplained(db: Kysely<Database>, id: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('notifications')
    .set({ complained_at: now })
    .where('id', '=', id)
    .where('complained_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
