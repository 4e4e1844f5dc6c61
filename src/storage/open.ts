import type { DatabaseConfig } from '../config.js';
import { openPostgres } from './postgres/open.js';
import { openSqlite, type SqliteOptions } from './sqlite/open.js';
import type { Storage } from './storage.js';

export function openStorage(config: DatabaseConfig, sqlite: SqliteOptions = {}): Storage {
  return config.kind === 'postgres'
    ? openPostgres({ url: config.url, poolSize: config.poolSize })
    : openSqlite(config.file, sqlite);
}
