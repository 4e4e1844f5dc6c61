import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { pruneIdempotencyKeys } from '../storage/idempotency.js';
import type { Database } from '../storage/schema.js';
import type { ApiLogService } from './api-log.js';

/**
 * Periodic housekeeping of the api role: API logs past their retention (age and row count) and
 * expired Idempotency-Keys are deleted, so neither table grows without bound.
 */
export class Janitor {
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly db: Kysely<Database>,
    private readonly apiLogs: ApiLogService,
    private readonly retention: { readonly retentionDays: number; readonly maxRows: number },
    private readonly logger: Logger,
    private readonly intervalMs = 10 * 60_000,
  ) {}

  start(): void {
    const tick = () =>
      void this.runOnce().catch((err: unknown) => this.logger.warn({ err }, 'housekeeping failed'));
    // A first pass soon after start, then at every interval; neither keeps the process alive.
    this.timers = [setTimeout(tick, 5_000).unref(), setInterval(tick, this.intervalMs).unref()];
  }

  async runOnce(now = Date.now()): Promise<{ apiLogs: number; idempotencyKeys: number }> {
    const apiLogs = await this.apiLogs.prune(
      now - this.retention.retentionDays * 86_400_000,
      this.retention.maxRows,
    );
    const idempotencyKeys = await pruneIdempotencyKeys(this.db, now);
    if (apiLogs + idempotencyKeys > 0)
      this.logger.info({ apiLogs, idempotencyKeys }, 'housekeeping deleted expired rows');
    return { apiLogs, idempotencyKeys };
  }

  stop(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers = [];
  }
}
