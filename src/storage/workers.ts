import type { Kysely } from 'kysely';
import type { Heartbeat } from '../domain/liveness.js';
import type { Database } from './schema.js';

/** Writes this worker's heartbeat, creating its row on the first beat (or after it was removed). */
export async function beat(db: Kysely<Database>, owner: string, now: number): Promise<void> {
  await db
    .insertInto('workers')
    .values({ owner, started_at: now, heartbeat_at: now })
    .onConflict((oc) => oc.column('owner').doUpdateSet({ heartbeat_at: now }))
    .execute();
}

export async function listHeartbeats(db: Kysely<Database>): Promise<Heartbeat[]> {
  const rows = await db.selectFrom('workers').select(['owner', 'heartbeat_at']).execute();
  return rows.map((row) => ({ owner: row.owner, beat: Number(row.heartbeat_at) }));
}

/**
 * Returns the messages that dead workers were sending to the queue, due now, and removes the dead
 * workers' rows. A row is removed only if its heartbeat is still the one judged dead: a worker that
 * beat again in the meantime (a long pause, not a death) keeps its row. Returns how many messages
 * went back to the queue.
 */
export async function reclaimFromDeadWorkers(
  db: Kysely<Database>,
  dead: readonly Heartbeat[],
  now: number,
): Promise<number> {
  if (dead.length === 0) return 0;
  return db.transaction().execute(async (tx) => {
    const result = await tx
      .updateTable('notifications')
      .set({ state: 'queued', lease_owner: null, lease_until: null, run_at: now, updated_at: now })
      .where('state', '=', 'sending')
      .where(
        'lease_owner',
        'in',
        dead.map((worker) => worker.owner),
      )
      .executeTakeFirst();
    for (const worker of dead) {
      await tx
        .deleteFrom('workers')
        .where('owner', '=', worker.owner)
        .where('heartbeat_at', '=', worker.beat)
        .execute();
    }
    return Number(result.numUpdatedRows);
  });
}

/** A worker that stops on purpose leaves no heartbeat behind for others to judge. */
export async function removeWorker(db: Kysely<Database>, owner: string): Promise<void> {
  await db.deleteFrom('workers').where('owner', '=', owner).execute();
}
