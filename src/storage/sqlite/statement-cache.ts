import type { SqliteDatabase, SqliteStatement } from 'kysely';

/**
 * Kysely's SQLite driver prepares every query anew, and preparing costs more than running the
 * small statements Herald issues. Herald's queries come from a fixed set of builders, so their SQL
 * texts are few: keeping the prepared statements removes the parse from every query. Reuse is
 * safe because better-sqlite3 runs each statement to completion synchronously.
 */
export function withStatementCache(database: SqliteDatabase, limit = 500): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    prepare(sql) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        // Dynamic filters could in principle produce unboundedly many texts; never grow past the limit.
        if (statements.size >= limit) statements.clear();
        statement = database.prepare(sql);
        statements.set(sql, statement);
      }
      return statement;
    },
    close() {
      statements.clear();
      database.close();
    },
  };
}
