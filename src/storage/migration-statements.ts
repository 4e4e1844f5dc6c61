import { sql, type Kysely, type Migration } from 'kysely';

/** A migration made of plain SQL statements, run in order inside the Migrator's transaction. */
export function statements(list: readonly string[]): Migration {
  return {
    async up(db: Kysely<unknown>) {
      for (const statement of list) await sql.raw(statement).execute(db);
    },
  };
}
