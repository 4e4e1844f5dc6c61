import { Migrator, sql, type Kysely, type Migration } from 'kysely';
import type { Database } from './schema.js';

/**
 * Applies pending migrations, each exactly once however many processes migrate at once.
 *
 * PostgreSQL: Kysely's Migrator takes an advisory lock and runs the migrations in a transaction,
 * so a second migrator waits, then finds nothing left to do.
 *
 * SQLite: Kysely's Migrator takes no lock there (its adapter assumes a single connection) and runs
 * no transaction (it reports no transactional DDL). Two processes on one file (`herald migrate`
 * while `herald serve` starts) would both run 001_initial and one fails with "table … already
 * exists"; a crash mid-migration would leave half a schema. So on SQLite the whole run happens in
 * one `BEGIN IMMEDIATE` transaction: it takes the write lock before reading which migrations were
 * applied (a second migrator waits on busy_timeout, then sees them applied), and it is atomic.
 */
export async function runMigrations(
  db: Kysely<Database>,
  migrations: Record<string, Migration>,
  options: { readonly sqlite: boolean },
): Promise<void> {
  if (!options.sqlite) {
    await migrateToLatest(db, migrations, false);
    return;
  }
  await db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection);
    try {
      await migrateToLatest(connection, migrations, true);
      await sql`commit`.execute(connection);
    } catch (error) {
      await sql`rollback`.execute(connection).catch(() => {});
      throw error;
    }
  });
}

async function migrateToLatest(
  db: Kysely<Database>,
  migrations: Record<string, Migration>,
  inTransaction: boolean,
): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'herald_migrations',
    migrationLockTableName: 'herald_migrations_lock',
    disableTransactions: inTransaction,
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed !== undefined) {
    const reason = error instanceof Error ? error.message : String(error ?? failed?.migrationName);
    throw new Error(`Database migration failed: ${reason}`, { cause: error });
  }
}
