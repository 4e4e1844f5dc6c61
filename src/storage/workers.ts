import type { Kysely } from 'kysely';
import type { WorkerBeat } from '../domain/liveness.js';
import { reclaimOwners } from './queue.js';
import type { Database } from './schema.js';

/** Writes this worker's heartbeat, creating its row on the first beat (or after it was removed). */
export async function beat(db: Kysely<Database>, owner: string, now: number): Promise<void> {
  await db
    .insertInto('workers')
    .values({ owner, started_at: now, heartbeat_at: now })
    .onConflict((oc) => oc.column('owner').doUpdateSet({ heartbeat_at: now }))
    .execute();
}

export async function listHeartbeats(db: Kysely<Database>): Promise<WorkerBeat[]> {
  const rows = await db.selectFrom('workers').select(['owner', 'heartbeat_at']).execute();
  return rows.map((row) => ({ owner: row.owner, beat: Number(row.heartbeat_at) }));
}

/**
 * Returns the rows that dead workers held to their queues, due now, and removes the dead workers'
 * rows. A worker counts as dead only if its row still holds the heartbeat it was judged on: one
 * that beat again in the meantime (a long pause, not a death) keeps its row and its leases.
 * Returns how many rows went back.
 */
export async function reclaimFromDeadWorkers(
  db: Kysely<Database>,
  dead: readonly WorkerBeat[],
  now: number,
): Promise<number> {
  if (dead.length === 0) return 0;
  return db.transaction().execute(async (tx) => {
    const gone: string[] = [];
    for (const worker of dead) {
      const removed = await tx
        .deleteFrom('workers')
        .where('owner', '=', worker.owner)
        .where('heartbeat_at', '=', worker.beat)
        .executeTakeFirst();
      if (Number(removed.numDeletedRows) > 0) gone.push(worker.owner);
    }
    // Work the dead worker was doing goes back too: webhook calls at least once, so a call that
    // may have reached the receiver is made again, with the same webhook-id.
    return gone.length === 0 ? 0 : reclaimOwners(tx, gone, now);
  });
}

/** A worker that stops on purpose leaves no heartbeat behind for others to judge. */
export async function removeWorker(db: Kysely<Database>, owner: string): Promise<void> {
  await db.deleteFrom('workers').where('owner', '=', owner).execute();
}
