import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * The backend every integration test runs against, chosen by HERALD_TEST_DATABASE (sqlite, the
 * default, or postgres). Each test file gets a fresh database of its own: a new SQLite file, or a
 * new PostgreSQL database created from HERALD_TEST_PG_URL and dropped afterwards.
 */
export type Backend = 'sqlite' | 'postgres';

export const backend: Backend = process.env.HERALD_TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';

export interface TestDatabase {
  /** Value for HERALD_DATABASE_URL. */
  readonly url: string;
  readonly dataDir: string;
  drop(): Promise<void>;
}

export function postgresBaseUrl(): string {
  const url = process.env.HERALD_TEST_PG_URL;
  if (!url) {
    throw new Error(
      'HERALD_TEST_DATABASE=postgres needs HERALD_TEST_PG_URL, e.g. postgres://postgres@127.0.0.1:5432/postgres',
    );
  }
  return url;
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: postgresBaseUrl() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A PostgreSQL database of its own (also used by tests that need PostgreSQL whatever the backend). */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `herald_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = new URL(postgresBaseUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

export async function freshDatabase(): Promise<TestDatabase> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-test-'));
  const removeDir = () => rmSync(dataDir, { recursive: true, force: true });
  if (backend === 'sqlite') {
    return { url: path.join(dataDir, 'herald.db'), dataDir, drop: async () => removeDir() };
  }
  const database = await createPostgresDatabase();
  return {
    url: database.url,
    dataDir,
    drop: async () => {
      await database.drop();
      removeDir();
    },
  };
}
