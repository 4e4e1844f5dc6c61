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
