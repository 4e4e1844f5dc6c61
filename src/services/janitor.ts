import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { pruneIdempotencyKeys } from '../storage/idempotency.js';
import { eraseFiles } from '../storage/notification-files.js';
import { pruneInboundReports } from '../storage/inbound-reports.js';
import { eraseFinishedContent } from '../storage/notifications.js';
import type { Database } from '../storage/schema.js';
import { foldUsage } from '../storage/usage.js';
import { pruneWebhookHistory } from '../storage/webhooks.js';
import type { ApiLogService } from './api-log.js';

/** Notifications erased per statement: keeps each transaction short on a busy store. */
const ERASE_BATCH = 1000;
/** At most this many batches per pass; the next pass continues where this one stopped. */
const ERASE_BATCHES_PER_PASS = 50;
/**
 * Files looked up at once, and at most this many lookups per pass. Each file is deleted by a
 * statement of its own: it may be 10 MiB, zeroed on disk as it goes (SQLite's secure_delete), and a
 * statement holds the store's writer while it runs.
 */
const FILES_PER_BATCH = 20;
const FILE_BATCHES_PER_PASS = 100;
/**
 * Files' bytes are written before the send that carries them is accepted; bytes no accept linked
 * this long after they were written never will be (a refused send, a crash in between): an accept
 * takes seconds at most.
 */
const UNLINKED_FILES_MS = 3_600_000;
/**
 * How often usage changes are folded into the counters. Readers add the unfolded changes
 * themselves, so this bounds only how many they add (a few thousand rows at most), not staleness.
 */
const FOLD_USAGE_MS = 30_000;
const FOLD_BATCH = 50_000;
/**
 * Days the fingerprints of read bounce reports are kept. A copy of a report read again within
 * them is never applied twice; a mailbox message left unmoved for longer would be read anew.
 */
export const INBOUND_REPORT_DAYS = 30;

export interface JanitorRetention {
  readonly apiLog: { readonly retentionDays: number; readonly maxRows: number };
  readonly contentRetentionDays: number;
  readonly webhooks: { readonly retentionDays: number };
}

/**
 * Periodic housekeeping of the api role: API and audit logs past their retention (age and row
 * count) and expired Idempotency-Keys are deleted, so no such table grows without bound; the
 * placeholder values, rendered content and files of notifications finished longer ago than the
 * content retention are erased (product.md §8, §12); finished webhook events past their retention
 * are deleted with their deliveries and attempts, and the fingerprints of read bounce reports after
 * INBOUND_REPORT_DAYS. More often, the usage changes appended by accepts and outcomes are folded
 * into the per-hour usage counters.
 */
export class Janitor {
  private timers: NodeJS.Timeout[] = [];
  /** An erase pass whose copies the store could not remove yet. */
  private copiesLeft = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly apiLogs: ApiLogService,
    private readonly retention: JanitorRetention,
    private readonly logger: Logger,
    private readonly intervalMs = 10 * 60_000,
    /** Removes the store's copies of what an erase pass erased (Storage.forgetErased). */
    private readonly forgetErased?: () => Promise<boolean>,
    /** The management API's audit log, kept as long as the API log (product.md §13). */
    private readonly auditLog?: { prune(before: number, keep: number): Promise<number> },
  ) {}

  start(): void {
    const tick = () =>
      void this.runOnce().catch((err: unknown) => this.logger.warn({ err }, 'housekeeping failed'));
    // A first pass soon after start, then at every interval; neither keeps the process alive.
    const fold = () =>
      void this.foldUsage().catch((err: unknown) =>
        this.logger.warn({ err }, 'folding usage counters failed'),
      );
    this.timers = [
      setTimeout(tick, 5_000).unref(),
      setInterval(tick, this.intervalMs).unref(),
      setInterval(fold, FOLD_USAGE_MS).unref(),
    ];
  }

  /** Folds every pending usage change into the counters; returns how many were folded. */
  async foldUsage(): Promise<number> {
    let folded = 0;
    for (;;) {
      const batch = await foldUsage(this.db, FOLD_BATCH);
      folded += batch;
      if (batch < FOLD_BATCH) return folded;
    }
  }

  async runOnce(now = Date.now()): Promise<{
    apiLogs: number;
    auditLog: number;
    idempotencyKeys: number;
    contents: number;
    files: number;
    webhookEvents: number;
    inboundReports: number;
  }> {
    const { apiLog, contentRetentionDays } = this.retention;
    const logsBefore = now - apiLog.retentionDays * 86_400_000;
    const apiLogs = await this.apiLogs.prune(logsBefore, apiLog.maxRows);
    const auditLog = (await this.auditLog?.prune(logsBefore, apiLog.maxRows)) ?? 0;
    const idempotencyKeys = await pruneIdempotencyKeys(this.db, now);
    await this.foldUsage();
    let contents = 0;
    const before = now - contentRetentionDays * 86_400_000;
    for (let i = 0; i < ERASE_BATCHES_PER_PASS; i++) {
      const erased = await eraseFinishedContent(this.db, { before, now, limit: ERASE_BATCH });
      contents += erased;
      if (erased < ERASE_BATCH) break;
    }
    // The files of every message whose content is erased, this pass's and any a pass left over,
    // and bytes no accept linked.
    let files = 0;
    for (let i = 0; i < FILE_BATCHES_PER_PASS; i++) {
      const erased = await eraseFiles(this.db, {
        unlinkedBefore: now - UNLINKED_FILES_MS,
        limit: FILES_PER_BATCH,
      });
      files += erased;
      if (erased < FILES_PER_BATCH) break;
    }
    // A copy of the database must not yield erased content (docs/security.md), WAL included.
    if ((contents > 0 || files > 0 || this.copiesLeft) && this.forgetErased !== undefined) {
      this.copiesLeft = !(await this.forgetErased());
      if (this.copiesLeft)
        this.logger.warn('erased content may remain in the WAL until the next pass: readers held it');
    }
    let webhookEvents = 0;
    const eventsBefore = now - this.retention.webhooks.retentionDays * 86_400_000;
    for (let i = 0; i < ERASE_BATCHES_PER_PASS; i++) {
      const pruned = await pruneWebhookHistory(this.db, eventsBefore, ERASE_BATCH);
      webhookEvents += pruned;
      if (pruned < ERASE_BATCH) break;
    }
    const inboundReports = await pruneInboundReports(this.db, now - INBOUND_REPORT_DAYS * 86_400_000);
    if (apiLogs + auditLog + idempotencyKeys + contents + files + webhookEvents + inboundReports > 0)
      this.logger.info(
        { apiLogs, auditLog, idempotencyKeys, contents, files, webhookEvents, inboundReports },
        'housekeeping deleted or erased expired data',
      );
    return { apiLogs, auditLog, idempotencyKeys, contents, files, webhookEvents, inboundReports };
  }

  stop(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers = [];
  }
}
