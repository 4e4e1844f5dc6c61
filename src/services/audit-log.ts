import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { insertAuditLog, listAuditLog, pruneAuditLog, type AuditLogFilter } from '../storage/audit-log.js';
import type { AuditLogRow, Database, NewAuditLogRow } from '../storage/schema.js';
import { BufferedLog, type BufferedLogOptions } from './buffered-log.js';

/**
 * Every call of the management API (product.md §13): which token made it, the method and path,
 * the status and when, written in batches off the request's path like the API log, and pruned by
 * the API log's retention (the janitor). Only calls made with a valid token are entries here
 * (calls without one are in the API log), so all of them are kept alike.
 */
export class AuditLogService extends BufferedLog<NewAuditLogRow> {
  constructor(
    private readonly db: Kysely<Database>,
    logger: Logger,
    options: Partial<BufferedLogOptions> = {},
  ) {
    super(
      { name: 'Audit log', insert: (rows) => insertAuditLog(db, rows), kindOf: () => 'authenticated' },
      logger,
      options,
    );
  }

  list(filter: AuditLogFilter): Promise<AuditLogRow[]> {
    return listAuditLog(this.db, filter);
  }

  prune(before: number, keep: number): Promise<number> {
    return pruneAuditLog(this.db, before, keep);
  }
}
