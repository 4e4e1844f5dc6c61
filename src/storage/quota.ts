import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Takes `count` units of quota atomically, all or none: the counter row is created at `count` or
 * incremented only while the result stays within the limit, in one statement. On PostgreSQL the ON CONFLICT update locks the row, so
 * concurrent transactions serialize on it; on SQLite the writer is single. Returns the new count,
 * or null when the window is used up.
 */
export async function takeQuota(
  db: Kysely<Database>,
  projectId: number,
  windowStart: number,
  limit: number,
  count = 1,
): Promise<number | null> {
  if (count > limit) return null;
  const row = await db
    .insertInto('quota_usage')
    .values({ project_id: projectId, window_start: windowStart, used: count })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'window_start'])
        .doUpdateSet((eb) => ({ used: eb('quota_usage.used', '+', count) }))
        .where('quota_usage.used', '<=', limit - count),
    )
    .returning('used')
    .executeTakeFirst();
  return row?.used ?? null;
}

export async function quotaUsed(
  db: Kysely<Database>,
  projectId: number,
  windowStart: number,
): Promise<number> {
  const row = await db
    .selectFrom('quota_usage')
    .select('used')
    .where('project_id', '=', projectId)
    .where('window_start', '=', windowStart)
    .executeTakeFirst();
  return row?.used ?? 0;
}
