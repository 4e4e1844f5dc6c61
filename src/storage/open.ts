import type { DatabaseConfig } from '../config.js';
import { openPostgres, type PostgresOptions } from './postgres/open.js';
import { openSqlite, type SqliteOptions } from './sqlite/open.js';
import type { Storage } from './storage.js';

/** What a long-running process asks of either backend beyond its connection. */
export type StorageOptions = SqliteOptions &
  Pick<
    PostgresOptions,
    | 'watchProjects'
    | 'watchWork'
    | 'onProjectChanges'
    | 'onWorkNotices'
    | 'projectChangesCheckMs'
    | 'noticeToken'
  >;

export function openStorage(config: DatabaseConfig, options: StorageOptions = {}): Storage {
  return config.kind === 'postgres'
    ? openPostgres({
        url: config.url,
        poolSize: config.poolSize,
        watchProjects: options.watchProjects,
        watchWork: options.watchWork,
        onProjectChanges: options.onProjectChanges,
        onWorkNotices: options.onWorkNotices,
        projectChangesCheckMs: options.projectChangesCheckMs,
        noticeToken: options.noticeToken,
      })
    : openSqlite(config.file, options);
}
