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
export class ApiLogService extends BufferedLog<NewApiLogRow> {
  constructor(
    private readonly db: Kysely<Database>,
    logger: Logger,
    options: Partial<ApiLogOptions> = {},
  ) {
    super(
      {
        name: 'API log',
        insert: (rows) => insertApiLogs(db, rows),
        kindOf: (row) => (row.project_id === null ? 'unauthenticated' : 'authenticated'),
      },
      logger,
      options,
    );
  }

  list(filter: ApiLogFilter): Promise<ApiLogRow[]> {
    return listApiLogs(this.db, filter);
  }

  prune(before: number, keep: number): Promise<number> {
    // Requests without a valid key get a budget of their own, a tenth of the authenticated one:
    // anybody can send them, so they must never push out the entries of real callers.
    return pruneApiLogs(this.db, before, keep, Math.max(1, Math.floor(keep / 10)));
  }
}
