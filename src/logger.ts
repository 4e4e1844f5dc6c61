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

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}
