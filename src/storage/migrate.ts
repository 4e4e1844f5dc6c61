import { Migrator, type Kysely, type Migration } from 'kysely';
import type { Database } from './schema.js';

/**
 * Applies pending migrations. Kysely's Migrator takes a lock (a row lock on PostgreSQL, the single
 * writer on SQLite) so that two processes migrating at once apply each migration exactly once.
 */
export async function runMigrations(
  db: Kysely<Database>,
  migrations: Record<string, Migration>,
): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'herald_migrations',
    migrationLockTableName: 'herald_migrations_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed !== undefined) {
    const reason = error instanceof Error ? error.message : String(error ?? failed?.migrationName);
    throw new Error(`Database migration failed: ${reason}`, { cause: error });
  }
}
