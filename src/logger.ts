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

/** How often trouble that lasts is logged again at its level, with how often it repeated. */
const TROUBLE_REPEAT_MS = 5 * 60_000;

/**
 * What a failure is, for telling one trouble from the next: its code where it has one, else its
 * message with the numbers taken out (a PostgreSQL error names the file it could not extend, a
 * connection error its port).
 */
function troubleOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' || typeof code === 'number') return String(code);
  return errorMessage(err).replace(/\d+/g, '#');
}

/**
 * A task retried on a timer while its trouble lasts (a heartbeat, a lease renewal, a claim while
 * the store refuses writes): its failure is logged at `level` when it begins or changes, at debug
 * while it repeats (again at `level` every five minutes, with the count), and its end once, at
 * info. A full disk or a lost database is then a few lines, not one with a stack trace a second.
 */
export class Trouble {
  private current: string | null = null;
  private repeats = 0;
  private loggedAt = 0;

  constructor(
    private readonly logger: Logger,
    /** What fails, as a log line begins: `heartbeat`, `renewing leases`. */
    private readonly what: string,
    private readonly level: 'warn' | 'error' = 'warn',
    private readonly fields: Record<string, unknown> = {},
    private readonly now: () => number = Date.now,
  ) {}

  failed(err: unknown, retry = 'retrying'): void {
    const trouble = troubleOf(err);
    const line = `${this.what} failed; ${retry}`;
    const now = this.now();
    if (trouble === this.current && now - this.loggedAt < TROUBLE_REPEAT_MS) {
      this.repeats++;
      this.logger.debug({ ...this.fields, problem: errorMessage(err) }, `${line} (still failing)`);
      return;
    }
    const repeated = trouble === this.current ? { repeats: this.repeats } : {};
    this.logger[this.level]({ ...this.fields, ...repeated, err }, line);
    this.current = trouble;
    this.repeats = 0;
    this.loggedAt = now;
  }

  succeeded(): void {
    if (this.current === null) return;
    this.current = null;
    this.logger.info(this.fields, `${this.what} works again`);
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
