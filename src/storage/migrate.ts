import { Migrator, type Kysely, type Migration } from 'kysely';
import type { Database } from './schema.js';

/**
 * Applies pending migrations with Kysely's Migrator. How a run is made exclusive across processes
 * is the backend's own business (PostgreSQL: the Migrator's advisory lock and transaction; SQLite:
 * see sqlite/migrate.ts), so each store calls this from its own `migrate`. Resolves with the names
 * of the migrations this run applied, in order: none when another process applied them first.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  migrations: Record<string, Migration>,
  options: { readonly inTransaction: boolean },
): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'herald_migrations',
    migrationLockTableName: 'herald_migrations_lock',
    disableTransactions: options.inTransaction,
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed !== undefined) {
    const reason = error instanceof Error ? error.message : String(error ?? failed?.migrationName);
    throw new Error(`Database migration failed: ${reason}`, { cause: error });
  }
  return (results ?? [])
    .filter((result) => result.status === 'Success')
    .map((result) => result.migrationName);
}
