import {
  sql,
  type Expression,
  type ExpressionBuilder,
  type Kysely,
  type SelectQueryBuilder,
  type SqlBool,
} from 'kysely';
import { insertInterruptedAttempts } from './delivery-attempts.js';
import { Precompiled } from './precompiled.js';
import type { Database, NotificationRow, WebhookDeliveryRow } from './schema.js';

/**
 * The tables that are lease queues. A row is the job: `ready` and due (`run_at`) it may be claimed;
 * claimed, it is `sending` under a lease (`lease_owner`, `lease_until`) until its owner finishes
 * it, releases it, or dies and another process returns it. Everything here is written once for
 * every queue; how rows are claimed is in claim.ts, and what differs per backend (the claim's
 * locking, the renewal's) is in sqlite/ and postgres/ behind `Storage`.
 */
export interface Queue<Table extends QueueTable = QueueTable> {
  readonly table: Table;
  /** The state of a row waiting for its time or for a worker. */
  readonly ready: 'queued' | 'pending';
  /** What a claim writes to the queue's rows besides the lease (`claimedValues`). */
  readonly claimResets: Partial<Pick<LeaseColumns, 'cancel_request'>>;
  /**
   * Whether a claim takes the projects' due rows in turns (claim-turns.ts) rather than the oldest due
   * rows of all, so that one project's backlog never holds another project's mail back
   * (product.md §8). The webhook queue is claimed per endpoint, which is fair already.
   */
  readonly inTurns: boolean;
  /**
   * Records the attempts of rows taken back from a worker that stopped holding them (a crash, a
   * stop that outlived its timeout): each was claimed, its attempt counted, and the attempt may
   * have been under way. Without it nothing is recorded (a webhook call is made again with the
   * same webhook-id, which says as much to its receiver).
   */
  readonly interrupted?: (db: Kysely<Database>, rows: readonly ReturnedLease[], now: number) => Promise<void>;
}

/** A row taken back from a stopped worker: its attempt, and when it was claimed. */
export interface ReturnedLease {
  readonly id: number;
  readonly attempts: number;
  readonly claimedAt: number;
}

export type QueueTable = 'notifications' | 'webhook_deliveries';

/** A claimed row of each queue. */
export interface QueueRows {
  notifications: NotificationRow;
  webhook_deliveries: WebhookDeliveryRow;
}

export const NOTIFICATION_QUEUE: Queue<'notifications'> = {
  table: 'notifications',
  ready: 'queued',
  // A cancel asks about the claim it saw, made before it asked: a request left from an earlier
  // claim (its canceler gone before an answer) is void (cancel-requests.ts).
  claimResets: { cancel_request: null },
  inTurns: true,
  interrupted: insertInterruptedAttempts,
};
export const WEBHOOK_QUEUE: Queue<'webhook_deliveries'> = {
  table: 'webhook_deliveries',
  ready: 'pending',
  claimResets: {},
  inTurns: false,
};
export const QUEUES: readonly Queue[] = [NOTIFICATION_QUEUE, WEBHOOK_QUEUE];

/** The state of a claimed row, the same in every queue. */
export const LEASED = 'sending';

/** The columns every queue table has. */
interface LeaseColumns {
  id: number;
  project_id: number;
  state: string;
  attempts: number;
  run_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  updated_at: number;
  /** Only the webhook queue has it (a claim per endpoint). */
  endpoint_id: number;
  /** Only the notification queue has it (cancel-requests.ts). */
  cancel_request: number | null;
}

/** The queue tables seen through the columns they share, so one query serves each of them. */
export type LeaseDatabase = Record<QueueTable, LeaseColumns>;

/** A query for ids of queue rows. */
export type IdQuery = SelectQueryBuilder<LeaseDatabase, QueueTable, { id: number }>;

export function leaseDb(db: Kysely<Database>): Kysely<LeaseDatabase> {
  return db as unknown as Kysely<LeaseDatabase>;
}

export interface RenewRequest {
  readonly ids: readonly number[];
  readonly owner: string;
  readonly leaseUntil: number;
}

/**
 * Extends the leases a worker holds: the rows of `renew.ids` still leased to it. `lock` is how a
 * backend selects them (PostgreSQL skips rows another transaction has locked).
 */
export async function renewWith(
  db: Kysely<Database>,
  queue: Queue,
  renew: RenewRequest,
  lock: (held: IdQuery) => IdQuery = (held) => held,
): Promise<void> {
  if (renew.ids.length === 0) return;
  const leases = leaseDb(db);
  const held = leases
    .selectFrom(queue.table)
    .select('id')
    .where('id', 'in', renew.ids)
    .where('state', '=', LEASED)
    .where('lease_owner', '=', renew.owner);
  await leases
    .updateTable(queue.table)
    .set({ lease_until: renew.leaseUntil })
    .where('id', 'in', lock(held))
    .execute();
}

/** A claimed row put back as if the claim had not happened: ready, unleased, its attempt uncounted. */
function unclaimed(queue: Queue, now: number) {
  return {
    state: queue.ready,
    lease_owner: null,
    lease_until: null,
    attempts: sql<number>`${sql.ref('attempts')} - 1`,
    updated_at: now,
  };
}

/**
 * Puts claimed rows back without counting an attempt: a stopping worker's rows it had not
 * started. Only the owner's, and only while they are still leased.
 */
export async function releaseClaims(
  db: Kysely<Database>,
  queue: Queue,
  ids: readonly number[],
  owner: string,
  now: number,
): Promise<void> {
  if (ids.length === 0) return;
  await leaseDb(db)
    .updateTable(queue.table)
    .set(unclaimed(queue, now))
    .where('id', 'in', ids)
    .where('state', '=', LEASED)
    .where('lease_owner', '=', owner)
    .execute();
}

/**
 * Returns to the queue, due now, the rows leased to `owner` whose lease ran out (before
 * `expiredBefore`, `now` unless said) although it does not hold them: a claim that committed while
 * its answer was lost (the connection dropped after the commit), or whose rows could not be given
 * back, leaves rows leased to a live worker that is not working them, and no other worker may take
 * a live owner's rows. They were never attempted, so no attempt stays counted. The rows it does
 * hold (`held`) are left alone even when their lease ran out: their outcome may be waiting to be
 * stored.
 */
export async function releaseUnseenClaims(
  db: Kysely<Database>,
  queue: Queue,
  owner: string,
  held: readonly number[],
  now: number,
  expiredBefore = now,
): Promise<number> {
  const result = await leaseDb(db)
    .updateTable(queue.table)
    .set({ ...unclaimed(queue, now), run_at: now })
    .where('state', '=', LEASED)
    .where('lease_owner', '=', owner)
    .where('lease_until', '<', expiredBefore)
    .$if(held.length > 0, (qb) => qb.where('id', 'not in', held))
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** How many rows are leased to `owner` that it does not hold (`held`), whatever their lease. */
export async function unheldLeases(
  db: Kysely<Database>,
  queue: Queue,
  owner: string,
  held: readonly number[],
): Promise<number> {
  const row = await leaseDb(db)
    .selectFrom(queue.table)
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .where('state', '=', LEASED)
    .where('lease_owner', '=', owner)
    .$if(held.length > 0, (qb) => qb.where('id', 'not in', held))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/**
 * Returns to their queues the rows whose lease ran out while their owner has no
 * heartbeat (a worker that died before heartbeats existed, or whose row was removed as dead). A
 * live owner keeps its rows past the lease: it may be waiting to record an outcome the store
 * refused (a full disk), and taking the row from it would send the message twice. The attempt
 * counted stays counted: the message may or may not have reached the relay.
 */
export async function reclaimExpiredLeases(db: Kysely<Database>, now: number): Promise<number> {
  return returnLeases(db, now, (eb) =>
    eb.and([
      eb('lease_until', '<', now),
      eb('lease_owner', 'not in', db.selectFrom('workers').select('owner')),
    ]),
  );
}

/** Returns every leased row of these owners to its queue (the owners are dead). */
export async function reclaimOwners(
  tx: Kysely<Database>,
  owners: readonly string[],
  now: number,
): Promise<number> {
  if (owners.length === 0) return 0;
  return returnLeases(tx, now, (eb) => eb('lease_owner', 'in', owners));
}

/** Runs `work` in a transaction: `db`'s own when it is one, else a new one. */
function inTransaction<T>(db: Kysely<Database>, work: (tx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}

/** Rows returned, and their attempts recorded, per statement. */
const RETURN_SLICE = 500;

/**
 * Returns the leased rows `which` picks to their queues, the attempt counted staying counted, and
 * records what the queue records of them (`Queue.interrupted`). Each keeps the time it fell due, so
 * it is taken again before mail that fell due after it: mail in flight when its worker died goes
 * first, not behind everything queued since. Returns how many.
 */
async function returnLeases(
  db: Kysely<Database>,
  now: number,
  which: (eb: ExpressionBuilder<LeaseDatabase, QueueTable>) => Expression<SqlBool>,
): Promise<number> {
  let returned = 0;
  for (const queue of QUEUES) {
    const table: QueueTable = queue.table;
    const leases = leaseDb(db);
    const back = { state: queue.ready, lease_owner: null, lease_until: null, updated_at: now };
    const record = queue.interrupted;
    if (record === undefined) {
      const result = await leases
        .updateTable(table)
        .set(back)
        .where('state', '=', LEASED)
        .where(which)
        .executeTakeFirst();
      returned += Number(result.numUpdatedRows);
      continue;
    }
    // Read before they are returned: a claim's time is its rows' updated_at until then. Returned
    // and recorded in one transaction, so that none goes back to the queue without its record.
    const held = await leases
      .selectFrom(table)
      .select(['id', 'attempts', 'updated_at'])
      .where('state', '=', LEASED)
      .where(which)
      .execute();
    // In slices, each statement's parameters well within either backend's bound.
    for (let at = 0; at < held.length; at += RETURN_SLICE) {
      const slice = held.slice(at, at + RETURN_SLICE);
      const ids = slice.map((row) => row.id);
      returned += await inTransaction(db, async (tx) => {
        const taken = await leaseDb(tx)
          .updateTable(table)
          .set(back)
          .where('id', 'in', ids)
          .where('state', '=', LEASED)
          .where(which)
          .returning(['id', 'attempts'])
          .execute();
        // Only the rows returned now (one its owner finished meanwhile is not), each with the
        // attempt it holds now; one claimed again after it was read is given the return's time.
        const read = new Map(slice.map((row) => [row.id, row]));
        const rows = taken.map(({ id, attempts }) => {
          const before = read.get(id);
          return { id, attempts, claimedAt: before?.attempts === attempts ? before.updated_at : now };
        });
        if (rows.length > 0) await record(tx, rows, now);
        return rows.length;
      });
    }
  }
  return returned;
}

/** The earliest time after `after` at which a ready row of the queue falls due, or null. */
export async function nextDueAt(db: Kysely<Database>, queue: Queue, after: number): Promise<number | null> {
  const row = await leaseDb(db)
    .selectFrom(queue.table)
    .select((eb) => eb.fn.min('run_at').as('next'))
    .where('state', '=', queue.ready)
    .where('run_at', '>', after)
    .executeTakeFirst();
  return row?.next == null ? null : Number(row.next);
}

/** What finishing a row needs to know of the claim it was taken by. */
export interface ClaimedRow {
  readonly id: number;
  /** Counts the row's claims: which claim this is. */
  readonly attempts: number;
}

/**
 * The statement that finishes a leased row: it writes `columns` and clears the lease, but only
 * while `owner` still holds it under the claim the outcome is of, so a worker whose lease was taken
 * back (its row returned to the queue and claimed again) cannot overwrite what happened since. That
 * holds when the same worker claimed it again too: every claim counts one more attempt, so an
 * outcome of an earlier claim, retried after its commit's answer was lost, finds no row. Built once
 * per queue and column set (see precompiled.ts): it runs once per job.
 */
export class FinishStatement<Column extends string> {
  private readonly statement: Precompiled<Column | 'id' | 'owner' | 'claim'>;

  constructor(queue: Queue, columns: readonly Column[]) {
    this.statement = new Precompiled([...columns, 'id', 'owner', 'claim'], (db, slot) =>
      leaseDb(db)
        .updateTable(queue.table)
        .set({
          ...(Object.fromEntries(columns.map((column) => [column, slot(column)])) as Record<string, never>),
          lease_owner: null,
          lease_until: null,
        })
        .where('id', '=', slot('id'))
        .where('state', '=', LEASED)
        .where('lease_owner', '=', slot('owner'))
        .where('attempts', '=', slot('claim')),
    );
  }

  /** False when the owner no longer holds the row's lease under this claim, and nothing was written. */
  async run(
    db: Kysely<Database>,
    row: ClaimedRow,
    owner: string,
    values: Readonly<Record<Column, unknown>>,
  ): Promise<boolean> {
    const result = await this.statement.runWith(db, (name) =>
      name === 'id' ? row.id : name === 'owner' ? owner : name === 'claim' ? row.attempts : values[name],
    );
    return (result.numAffectedRows ?? 0n) > 0n;
  }

  /**
   * Finishes each item's row with the values `valuesOf` gives it, then runs `stored` for each row
   * `owner` still held, in order. Says, per item, whether it was stored.
   */
  async runEach<Item extends { readonly row: ClaimedRow }>(
    db: Kysely<Database>,
    owner: string,
    items: readonly Item[],
    valuesOf: (item: Item) => Readonly<Record<Column, unknown>>,
    stored: (item: Item) => Promise<void>,
  ): Promise<boolean[]> {
    const finished: boolean[] = [];
    for (const item of items) {
      const held = await this.run(db, item.row, owner, valuesOf(item));
      finished.push(held);
      if (held) await stored(item);
    }
    return finished;
  }
}
