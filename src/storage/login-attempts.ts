import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** A throttle key's failures in its current window. */
export interface LoginFailures {
  readonly key: string;
  readonly failures: number;
  readonly windowStartedAt: number;
}

/** The failures counted for these keys in windows that started at or after `windowStart`. */
export async function loginFailures(
  db: Kysely<Database>,
  keys: readonly string[],
  windowStart: number,
): Promise<LoginFailures[]> {
  if (keys.length === 0) return [];
  const rows = await db
    .selectFrom('login_attempts')
    .select(['key', 'failures', 'window_started_at'])
    .where('key', 'in', [...keys])
    .where('window_started_at', '>=', windowStart)
    .execute();
  return rows.map((row) => ({
    key: row.key,
    failures: Number(row.failures),
    windowStartedAt: Number(row.window_started_at),
  }));
}

/**
 * Counts one failure for each key, in one statement per key: a window that started before
 * `windowStart` is over, so the count starts again at 1 with a window starting `now`. Atomic on
 * both backends (an upsert), so concurrent failures in several processes are all counted.
 */
export async function addLoginFailure(
  db: Kysely<Database>,
  keys: readonly string[],
  now: number,
  windowStart: number,
): Promise<void> {
  for (const key of keys) {
    await db
      .insertInto('login_attempts')
      .values({ key, failures: 1, window_started_at: now, updated_at: now })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet((eb) => {
          const over = eb('login_attempts.window_started_at', '<', windowStart);
          return {
            failures: eb
              .case()
              .when(over)
              .then(1)
              .else(eb('login_attempts.failures', '+', 1))
              .end(),
            window_started_at: eb
              .case()
              .when(over)
              .then(now)
              .else(eb.ref('login_attempts.window_started_at'))
              .end(),
            updated_at: now,
          };
        }),
      )
      .execute();
  }
}

export async function clearLoginFailures(db: Kysely<Database>, keys: readonly string[]): Promise<void> {
  if (keys.length > 0)
    await db
      .deleteFrom('login_attempts')
      .where('key', 'in', [...keys])
      .execute();
}

/**
 * Deletes the keys whose window is over, then the least recently failed beyond `keep`: the table
 * stays bounded however many addresses and emails a stranger tries. Returns how many went.
 */
export async function pruneLoginFailures(
  db: Kysely<Database>,
  windowStart: number,
  keep: number,
): Promise<number> {
  const expired = await db
    .deleteFrom('login_attempts')
    .where('window_started_at', '<', windowStart)
    .executeTakeFirst();
  const cutoff = await db
    .selectFrom('login_attempts')
    .select('updated_at')
    .orderBy('updated_at', 'desc')
    .offset(keep)
    .limit(1)
    .executeTakeFirst();
  let excess = 0;
  if (cutoff !== undefined) {
    const deleted = await db
      .deleteFrom('login_attempts')
      .where('updated_at', '<=', Number(cutoff.updated_at))
      .executeTakeFirst();
    excess = Number(deleted.numDeletedRows);
  }
  return Number(expired.numDeletedRows) + excess;
}
