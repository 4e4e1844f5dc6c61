import type { Logger } from 'pino';
import type { AttemptResult } from '../domain/attempt.js';
import { attemptFinished, type AttemptOutcome, type AttemptPolicy } from '../domain/lifecycle.js';
import type { AttemptRoute } from '../domain/relay-health.js';
import type { LeaseQueue } from '../queue/lease-queue.js';
import type { NotificationRow } from '../storage/schema.js';
import type { Attempted } from './outcomes.js';

/** What an attempt came to, for the worker's logs and metrics. */
export interface DeliveryOutcome {
  readonly projectId: number;
  readonly outcome: AttemptOutcome;
  readonly transport: 'smtp' | 'capture' | null;
  readonly durationMs: number;
}

/**
 * Records a finished attempt: the lifecycle decides what it comes to (domain/lifecycle.ts), the
 * lease queue stores it with the next group commit while this worker still holds the row, and a
 * stored outcome is logged and told to the metrics.
 */
export class AttemptRecorder {
  /** Told about every stored outcome (metrics); must not throw or block. */
  onOutcome: ((outcome: DeliveryOutcome) => void) | null = null;

  constructor(
    private readonly queue: LeaseQueue<'notifications', Attempted>,
    private readonly policy: AttemptPolicy,
    private readonly logger: Logger,
    private readonly now: () => number,
  ) {}

  /** `route` names the relay the attempt went to, or was meant for when it was not made. */
  async record(
    row: NotificationRow,
    result: AttemptResult,
    route: AttemptRoute | null,
    startedAt: number,
    finishedAt: number,
  ): Promise<void> {
    const transition = attemptFinished(row, result, this.policy, finishedAt, route);
    if (!(await this.queue.finish(row, { transition, startedAt, finishedAt }))) {
      this.logger.warn({ requestId: row.request_id }, 'lease lost before the outcome was recorded');
      return;
    }
    if (!result.ok)
      this.logger.warn(
        {
          projectId: row.project_id,
          requestId: row.request_id,
          attempt: row.attempts,
          smtpCode: result.failure.smtpCode,
          reply: result.failure.message,
          relay: route?.relay,
        },
        transition.outcome === 'retry' ? 'delivery failed; will retry' : 'delivery failed permanently',
      );
    try {
      this.onOutcome?.({
        projectId: row.project_id,
        outcome: transition.outcome,
        transport: result.transport,
        durationMs: this.now() - startedAt,
      });
    } catch {
      // Logging and metrics only; the outcome is stored.
    }
  }
}
