import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { insertApiLogs, listApiLogs, pruneApiLogs, type ApiLogFilter } from '../storage/api-logs.js';
import type { ApiLogRow, Database, NewApiLogRow } from '../storage/schema.js';
import { BufferedLog, type BufferedLogOptions, type LogEntryKind } from './buffered-log.js';

/** Whose entry was dropped: a request with a valid key, or one without. */
export type ApiLogKind = LogEntryKind;

export type ApiLogOptions = BufferedLogOptions;

/**
 * Records every API request without putting a write on the request's path (buffered-log.ts): the
 * entries of requests without a valid key are kept apart and dropped first, so a flood of them
 * never pushes out the entries of real callers.
 */
export class ApiLogService extends BufferedLog<NewApiLogRow, ApiLogFilter, ApiLogRow> {
  constructor(db: Kysely<Database>, logger: Logger, options: Partial<ApiLogOptions> = {}) {
    const sink = {
      name: 'API log',
      insert: (rows: readonly NewApiLogRow[]) => insertApiLogs(db, rows),
      kindOf: (row: NewApiLogRow): ApiLogKind =>
        row.project_id === null ? 'unauthenticated' : 'authenticated',
      list: (filter: ApiLogFilter) => listApiLogs(db, filter),
      // Requests without a valid key get a budget of their own, a tenth of the authenticated one:
      // anybody can send them, so they must never push out the entries of real callers.
      prune: (before: number, keep: number) =>
        pruneApiLogs(db, before, keep, Math.max(1, Math.floor(keep / 10))),
    };
    super(sink, logger, options);
  }
}
