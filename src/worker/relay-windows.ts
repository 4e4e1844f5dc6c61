import type { Logger } from 'pino';
import {
  nextWindow,
  openWindow,
  relaySignal,
  windowSize,
  type RelayWindow,
  type WindowPolicy,
} from '../domain/relay-window.js';
import type { AttemptResult } from './deliver.js';

/**
 * The worker's window per relay (host and port): how many SMTP transactions it may have in flight
 * there, fed with each answer (domain/relay-window.ts holds the rules).
 */
export class RelayWindows {
  private readonly windows = new Map<string, RelayWindow>();

  constructor(
    private readonly policy: WindowPolicy,
    private readonly logger: Logger,
  ) {}

  /** Transactions the relay may have in flight now. */
  size(relay: string): number {
    return windowSize(this.window(relay));
  }

  /** The round a transaction starting now belongs to; its answer is judged against it. */
  round(relay: string): number {
    return this.window(relay).round;
  }

  /** Every relay's window now (metrics, tests). */
  sizes(): Map<string, number> {
    return new Map([...this.windows].map(([relay, window]) => [relay, windowSize(window)]));
  }

  /**
   * Feeds one finished attempt to its relay's window: `inFlight` transactions to the relay were
   * in flight when it ended, its own included.
   */
  learn(
    relay: string,
    finished: { round: number; inFlight: number; durationMs: number },
    result: AttemptResult,
  ): void {
    if (result.transport !== 'smtp') return;
    const { durationMs } = finished;
    const signal = relaySignal(
      result.ok
        ? { ok: true, smtpCode: result.smtpCode, reply: result.response, transient: false, durationMs }
        : {
            ok: false,
            smtpCode: result.failure.smtpCode,
            reply: result.failure.message,
            transient: result.failure.kind === 'transient',
            durationMs,
          },
      this.policy,
    );
    const before = this.window(relay);
    const after = nextWindow(
      before,
      { signal, round: finished.round, inFlight: finished.inFlight },
      this.policy,
    );
    if (after === before) return;
    this.windows.set(relay, after);
    if (after.round !== before.round)
      this.logger.info(
        { relay, window: windowSize(after), reply: result.ok ? null : result.failure.message },
        'relay congested; fewer transactions in flight to it',
      );
  }

  private window(relay: string): RelayWindow {
    let window = this.windows.get(relay);
    if (window === undefined) this.windows.set(relay, (window = openWindow(this.policy)));
    return window;
  }
}
