import type { Kysely, UpdateQueryBuilder, UpdateResult } from 'kysely';
import { canceledBeforeSending } from '../domain/lifecycle.js';
import { LEASED } from './queue.js';
import type { Database, NotificationRow } from './schema.js';
import { applyTransition, type Written } from './transitions.js';

/**
 * Cancels of claimed messages (product.md §6: a message may be canceled while it is queued and not
 * in an SMTP transaction). A claimed message waits in its worker's backlog, or parked behind a busy
 * relay, before its transaction begins, and only that worker knows when it begins. So the canceler
 * asks, in the row (`cancel_request`, the claim it saw), and the worker answers in its own order
 * of events: a message not yet begun is canceled (`canceledBeforeSending`), one already begun
 * keeps going and the request is cleared. Each answer is a conditional update on the request
 * still waiting, and so is the canceler's withdrawal when no answer comes: exactly one of them
 * decides.
 */

/** A claim a cancel waits on. */
export interface ClaimOf {
  readonly id: number;
  /** The row's `attempts` under the claim: which claim it is. */
  readonly attempts: number;
}

/**
 * A claim as a canceler saw it. `attempts` alone does not tell claims apart: a claim given back
 * uncounted and taken again has the same count, so the owner and the claim's time go with it.
 */
export type SeenClaim = ClaimOf & Pick<NotificationRow, 'lease_owner' | 'updated_at'>;

type NotificationUpdate = UpdateQueryBuilder<Database, 'notifications', 'notifications', UpdateResult>;

/** Narrows an update to `claim`'s row while `claim.lease_owner` still holds it under that claim. */
function whereHeld(query: NotificationUpdate, claim: ClaimOf & Pick<NotificationRow, 'lease_owner'>) {
  return query
    .where('id', '=', claim.id)
    .where('attempts', '=', claim.attempts)
    .where('lease_owner', '=', claim.lease_owner);
}

/** An update made only while the row is still the claim a canceler saw (`sameClaim`). */
function whereSeen(query: NotificationUpdate, seen: SeenClaim) {
  return whereHeld(query, seen).where('state', '=', LEASED).where('updated_at', '=', seen.updated_at);
}

/** Asks the worker holding `row` under the claim seen to cancel it; false when it no longer holds it so. */
export async function requestCancel(db: Kysely<Database>, row: SeenClaim): Promise<boolean> {
  const result = await whereSeen(
    db.updateTable('notifications').set({ cancel_request: row.attempts }),
    row,
  ).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Whether `now` is still the claim `seen`. */
export function sameClaim(seen: SeenClaim, now: Pick<NotificationRow, 'state' | keyof SeenClaim>): boolean {
  return (
    now.state === LEASED &&
    now.attempts === seen.attempts &&
    now.lease_owner === seen.lease_owner &&
    now.updated_at === seen.updated_at
  );
}

/**
 * Takes back a request no worker has answered; true when it still waited (nothing was canceled,
 * and no worker will cancel the message for it now).
 */
export async function withdrawCancel(db: Kysely<Database>, row: SeenClaim): Promise<boolean> {
  const result = await whereSeen(db.updateTable('notifications').set({ cancel_request: null }), row)
    .where('cancel_request', '=', row.attempts)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** What a waiting canceler looks at: the row's state, claim and request, and nothing of its content. */
export async function cancelStanding(
  db: Kysely<Database>,
  id: number,
): Promise<
  | Pick<NotificationRow, 'id' | 'state' | 'attempts' | 'lease_owner' | 'updated_at' | 'cancel_request'>
  | undefined
> {
  return db
    .selectFrom('notifications')
    .select(['id', 'state', 'attempts', 'lease_owner', 'updated_at', 'cancel_request'])
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The cancels waiting for `owner`: rows it holds whose current claim a canceler asks about. */
export async function cancelRequestsFor(db: Kysely<Database>, owner: string): Promise<ClaimOf[]> {
  const rows = await db
    .selectFrom('notifications')
    .select(['id', 'cancel_request'])
    .where('lease_owner', '=', owner)
    .where('cancel_request', 'is not', null)
    .where('state', '=', LEASED)
    .whereRef('cancel_request', '=', 'attempts')
    .execute();
  return rows.map((row) => ({ id: row.id, attempts: row.cancel_request! }));
}

/**
 * Cancels a claimed row whose transaction had not begun, in `owner`'s name: undefined when the
 * request no longer waits (withdrawn) or the row is no longer `owner`'s under that claim.
 */
export async function cancelClaimed(
  tx: Kysely<Database>,
  row: NotificationRow,
  owner: string,
  now: number,
): Promise<Written | undefined> {
  const transition = canceledBeforeSending(row, owner, now);
  return transition === null ? undefined : applyTransition(tx, row, transition, now);
}

/** Answers requests about rows whose transaction has begun: they stay as they are, and are sent. */
export async function refuseCancels(
  db: Kysely<Database>,
  owner: string,
  requests: readonly ClaimOf[],
): Promise<void> {
  for (const request of requests) {
    await whereHeld(db.updateTable('notifications').set({ cancel_request: null }), {
      ...request,
      lease_owner: owner,
    })
      .where('cancel_request', '=', request.attempts)
      .execute();
  }
}
