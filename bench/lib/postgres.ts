/**
 * A fresh PostgreSQL database per run for Herald's scale-out figure, created and dropped with psql
 * through the server's maintenance database. Used when HERALD_BENCH_PG_URL is set, or when
 * something answers on 127.0.0.1:5432 (then as user postgres with trust auth).
 */
import { onCleanup, runCommand } from './processes.js';
import { HOST, tcpAnswers } from './net.js';

export interface PgDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** The server to use, or why there is none. */
export async function findPostgres(): Promise<{ baseUrl: string } | { skip: string }> {
  const configured = process.env.HERALD_BENCH_PG_URL;
  if (configured !== undefined && configured !== '') return { baseUrl: configured };
  if (!(await tcpAnswers(HOST, 5432, 1_000))) {
    return { skip: 'PostgreSQL: HERALD_BENCH_PG_URL is not set and nothing answers on 127.0.0.1:5432' };
  }
  return { baseUrl: `postgres://postgres@${HOST}:5432/postgres` };
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function psql(adminUrl: string, sql: string, cleanup = false): Promise<void> {
  await runCommand('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', adminUrl, '-c', sql], {
    timeoutMs: 60_000,
    cleanup,
  });
}

export async function createDatabase(baseUrl: string): Promise<PgDatabase> {
  const name = `herald_bench_${Date.now()}_${process.pid}`;
  const adminUrl = withDatabase(baseUrl, 'postgres');
  try {
    await psql(adminUrl, `CREATE DATABASE "${name}"`);
  } catch (error) {
    throw new Error(
      `could not create a PostgreSQL database (is psql installed?): ${(error as Error).message}`,
    );
  }
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    unregister();
    await psql(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`, true);
  };
  const unregister = onCleanup(drop);
  return { url: withDatabase(baseUrl, name), name, drop };
}
