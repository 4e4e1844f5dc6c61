import pino, { type Logger } from 'pino';

/**
 * Secrets never reach the logs: API keys, passwords and SMTP URLs (which may carry credentials) are
 * censored wherever they appear in a logged object.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'apiKey',
  'api_key',
  'password',
  'pass',
  'smtpUrl',
  'secretKey',
  '*.apiKey',
  '*.api_key',
  '*.password',
  '*.pass',
  '*.smtpUrl',
  '*.secretKey',
  '*.auth',
];

/**
 * JSON lines for log collectors; with `pretty` (stdout is a terminal) readable coloured lines with
 * local times instead, through pino-pretty in pino's worker thread. Redaction happens before either.
 */
export function createLogger(
  level: string,
  destination?: pino.DestinationStream,
  options: { pretty?: boolean } = {},
): Logger {
  const base = { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  if (options.pretty && destination === undefined) {
    return pino({
      ...base,
      transport: {
        target: 'pino-pretty',
        options: { translateTime: 'SYS:yyyy-mm-dd HH:MM:ss', ignore: 'pid,hostname,setupUrl' },
      },
    });
  }
  return pino(base, destination);
}

/**
 * A task retried on a timer while its trouble lasts (a heartbeat, a lease renewal, a claim while
 * the store refuses writes): its failure is logged at `level` when it begins or its message
 * changes, at debug while it repeats, and its end once, at info. A full disk or a lost database
 * is then a few lines, not one with a stack trace every second.
 */
export class Trouble {
  private current: string | null = null;

  constructor(
    private readonly logger: Logger,
    /** What fails, as a log line begins: `heartbeat`, `renewing leases`. */
    private readonly what: string,
    private readonly level: 'warn' | 'error' = 'warn',
    private readonly fields: Record<string, unknown> = {},
  ) {}

  failed(err: unknown, retry = 'retrying'): void {
    const problem = err instanceof Error ? err.message : String(err);
    const line = `${this.what} failed; ${retry}`;
    if (problem === this.current) this.logger.debug({ ...this.fields, problem }, `${line} (still failing)`);
    else this.logger[this.level]({ ...this.fields, err }, line);
    this.current = problem;
  }

  succeeded(): void {
    if (this.current === null) return;
    this.current = null;
    this.logger.info(this.fields, `${this.what} works again`);
  }
}
