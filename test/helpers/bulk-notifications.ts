import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/storage/schema.js';

/**
 * Stores `count` notifications of one project with one INSERT … SELECT on the database itself
 * (a recursive counter on SQLite, generate_series on PostgreSQL), hundreds of thousands a second,
 * then counts them into the usage counters as the upgrade migration does. Every 1000th is
 * `failed`, the rest `sent`; recipients are user<n>@example.org, created one second apart and
 * ending now. Used by the search tests and the dashboard benchmark (bench/dashboard.ts).
 */
export async function bulkNotifications(
  db: Kysely<Database>,
  kind: 'sqlite' | 'postgres',
  projectId: number,
  count: number,
  now = Date.now(),
): Promise<void> {
  const t0 = now - count * 1000;
  const columns = sql.raw(
    'request_id, project_id, template, recipient, data, type, state, attempts, run_at, created_at, updated_at, sent_at, subject, text_body, transport',
  );
  const row = (n: string) =>
    sql.raw(`'bulk_' || ${n}, ${projectId}, 'user_created', 'user' || ${n} || '@example.org',
      '{"user_name":"User ' || ${n} || '"}', 'email',
      CASE WHEN ${n} % 1000 = 0 THEN 'failed' ELSE 'sent' END, 1,
      ${t0} + ${n} * 1000, ${t0} + ${n} * 1000, ${t0} + ${n} * 1000 + 40,
      CASE WHEN ${n} % 1000 = 0 THEN NULL ELSE ${t0} + ${n} * 1000 + 40 END,
      'Welcome User ' || ${n}, 'Hello User ' || ${n}, 'smtp'`);
  if (kind === 'sqlite') {
    await sql`INSERT INTO notifications (${columns})
      WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ${count})
      SELECT ${row('n')} FROM seq`.execute(db);
  } else {
    await sql`INSERT INTO notifications (${columns})
      SELECT ${row('n')} FROM generate_series(1, ${count}::bigint) AS n`.execute(db);
  }
  await sql`INSERT INTO usage_deltas (project_id, hour_start, state, delta)
    SELECT project_id, created_at - (created_at % 3600000), state, COUNT(*)
    FROM notifications WHERE project_id = ${projectId} AND request_id LIKE 'bulk\\_%' ESCAPE '\\'
    GROUP BY project_id, created_at - (created_at % 3600000), state`.execute(db);
}
