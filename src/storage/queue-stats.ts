import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * What the metrics endpoint reports about the queue. Each count reads one partial index
 * (notifications_due, notifications_leased), never the finished rows, however many pile up.
 */
export async function queueStats(
  db: Kysely<Database>,
  now: number,
): Promise<{ queued: number; sending: number; oldestDueAt: number | null }> {
  const [queued, sending] = await Promise.all([
    db
      .selectFrom('notifications')
      .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('run_at').as('oldest')])
      .where('state', '=', 'queued')
      .where('run_at', '>=', 0)
      .executeTakeFirst(),
    db
      .selectFrom('notifications')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', '=', 'sending')
      .executeTakeFirst(),
  ]);
  const oldest = queued?.oldest == null ? null : Number(queued.oldest);
  return {
    queued: Number(queued?.count ?? 0),
    sending: Number(sending?.count ?? 0),
    oldestDueAt: oldest !== null && oldest <= now ? oldest : null,
  };
}
