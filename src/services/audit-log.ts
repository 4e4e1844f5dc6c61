import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { insertAuditLog, listAuditLog, pruneAuditLog, type AuditLogFilter } from '../storage/audit-log.js';
import type { AuditLogRow, Database, NewAuditLogRow } from '../storage/schema.js';
import { BufferedLog, type BufferedLogOptions, type LogEntryKind } from './buffered-log.js';

/**
 * Every call of the management API (product.md §13): which token made it, the method and path,
 * the status and when, written in batches off the request's path like the API log, and pruned by
 * the API log's retention (the janitor). Only calls made with a valid token are entries here
 * (calls without one are in the API log), so all of them are kept alike.
 */
export class AuditLogService extends BufferedLog<NewAuditLogRow, AuditLogFilter, AuditLogRow> {
  constructor(db: Kysely<Database>, logger: Logger, options: Partial<BufferedLogOptions> = {}) {
    const sink = {
      name: 'Audit log',
      insert: (rows: readonly NewAuditLogRow[]) => insertAuditLog(db, rows),
      kindOf: (): LogEntryKind => 'authenticated',
      list: (filter: AuditLogFilter) => listAuditLog(db, filter),
      prune: (before: number, keep: number) => pruneAuditLog(db, before, keep),
    };
    super(sink, logger, options);
  }
}
