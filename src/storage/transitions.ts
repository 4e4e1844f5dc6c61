import type { Kysely } from 'kysely';
import type { Transition } from '../domain/lifecycle.js';
import { notificationView } from '../domain/notification.js';
import type { Database, NotificationRow } from './schema.js';
import { addSuppressions } from './suppressions.js';
import { addUsage } from './usage.js';
import { recordEvents } from './webhook-events.js';

/** A transition that applied, with the row as it became and the time it was decided. */
export interface Applied {
  readonly projectId: number;
  readonly notificationId: number;
  /** The row as it became: asked for only where an event reports it. */
  readonly row: () => NotificationRow;
  readonly transition: Transition;
  readonly at: number;
}

/** A transition written: the row as it became, and how many webhook deliveries its event queued. */
export interface Written {
  readonly row: NotificationRow;
  readonly webhookDeliveries: number;
}

/**
 * Applies a lifecycle transition (domain/lifecycle.ts) to the row it was decided on, in the
 * caller's transaction: the update is conditional on what the transition requires of the row, so
 * when another change got there first nothing is written and undefined is returned (the caller
 * reads the row again and asks the lifecycle anew). Otherwise its usage moves, event and
 * suppression are written with it. The caller announces the webhook deliveries once it commits.
 */
export async function applyTransition(
  tx: Kysely<Database>,
  row: NotificationRow,
  transition: Transition,
  now: number,
): Promise<Written | undefined> {
  let after: NotificationRow | undefined = row;
  if (Object.keys(transition.changes).length > 0) {
    let update = tx.updateTable('notifications').set(transition.changes).where('id', '=', row.id);
    for (const [column, value] of Object.entries(transition.requires) as [
      keyof Transition['requires'],
      unknown,
    ][])
      update = value === null ? update.where(column, 'is', null) : update.where(column, '=', value as never);
    after = await update.returningAll().executeTakeFirst();
    if (after === undefined) return undefined;
  }
  const applied = after;
  const webhookDeliveries = await recordEffects(tx, [
    { projectId: applied.project_id, notificationId: applied.id, row: () => applied, transition, at: now },
  ]);
  return { row: applied, webhookDeliveries };
}

/**
 * What applied transitions bring about besides their rows, written together: the usage moves
 * (the counters change in the transaction that changes the state), the events (an outbox: a crash
 * loses the state change and its event together, or neither) and the suppressions. Returns how
 * many webhook deliveries the events queued.
 */
export async function recordEffects(tx: Kysely<Database>, applied: readonly Applied[]): Promise<number> {
  await addUsage(
    tx,
    applied.flatMap(({ transition }) => transition.usage),
  );
  const deliveries = await recordEvents(
    tx,
    applied.flatMap(({ projectId, notificationId, row, at, transition: { event } }) =>
      event === null
        ? []
        : [
            {
              projectId,
              notificationId,
              type: event.type,
              data: () => ({ ...notificationView(row()), ...event.extra }),
              at,
            },
          ],
    ),
  );
  await addSuppressions(
    tx,
    applied.flatMap(({ at, transition: { suppression } }) =>
      suppression === null ? [] : [{ ...suppression, now: at }],
    ),
  );
  return deliveries;
}
