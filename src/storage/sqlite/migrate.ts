import { sql, type Kysely } from 'kysely';
import { migrateToLatest } from '../migrate.js';
import type { Database } from '../schema.js';
import { migrationsFor, SQLITE_TYPES } from '../migrations.js';

/**
 * Applies pending migrations, each exactly once however many processes migrate one file at once.
 *
 * Kysely's Migrator takes no lock on SQLite (its adapter assumes a single connection) and runs no
 * transaction (it reports no transactional DDL). Two processes on one file (`herald migrate` while
 * `herald serve` starts) would both run 001_initial and one would fail with "table … already
 * exists"; a crash mid-migration would leave half a schema. So the whole run happens in one
 * `BEGIN IMMEDIATE` transaction: it takes the write lock before reading which migrations were
 * applied (a second migrator waits on busy_timeout, then sees them applied), and it is atomic.
 */
export async function migrateSqlite(db: Kysely<Database>): Promise<string[]> {
  return db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection);
    try {
      const applied = await migrateToLatest(connection, migrationsFor(SQLITE_TYPES), { inTransaction: true });
      await sql`commit`.execute(connection);
      return applied;
    } catch (error) {
      await sql`rollback`.execute(connection).catch(() => {});
      throw error;
    }
  });
}
