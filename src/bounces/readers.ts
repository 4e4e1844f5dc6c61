import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';
import type { Metrics } from '../metrics/metrics.js';
import { newOwnerName } from '../queue/pool.js';
import type { Database } from '../storage/schema.js';
import { ImapIntake } from './imap-intake.js';
import type { BounceIntake } from './intake.js';
import { BounceListener } from './listener.js';
import { ReportReceiver } from './receive.js';
import { ReportParser, type ReportParserOptions } from './report-parser.js';

/** What the bounce readers are built from (the composition root hands them over). */
export interface ReaderDeps {
  readonly config: Config['bounces'];
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly db: Kysely<Database>;
  readonly intake: BounceIntake;
  /** The bounce token MAC key. */
  readonly key: Buffer;
}

/** What tests change: the IMAP back-off, the parsing thread's bounds. */
export interface ReaderOverrides {
  readonly imapBackoffMs?: number;
  readonly imapMaxBackoffMs?: number;
  readonly parser?: ReportParserOptions;
}

/** What reads bounce reports in a process: the SMTP listener, the IMAP mailbox, or both. */
export interface BounceReaders {
  readonly listener: BounceListener | null;
  readonly imap: ImapIntake | null;
  readonly parser: ReportParser;
  /** Listens and starts watching; the listener's port, when it runs. */
  start(): Promise<number | null>;
  close(): Promise<void>;
}

/**
 * The bounce readers of role `bounces` (and role all's delivery process): the inbound SMTP listener
 * when HERALD_BOUNCE_SMTP_PORT is set, the mailbox when HERALD_BOUNCE_IMAP_URL is, both reading
 * through one receiver and one parsing thread.
 */
export function bounceReaders(deps: ReaderDeps, overrides: ReaderOverrides = {}): BounceReaders {
  const bounces = deps.config;
  const smtp = bounces.domain !== null && bounces.port !== null;
  if (!smtp && bounces.imap === null)
    throw new ConfigError(
      'role bounces needs HERALD_BOUNCE_DOMAIN and HERALD_BOUNCE_SMTP_PORT, or HERALD_BOUNCE_IMAP_URL',
    );
  const logger = deps.logger.child({ role: 'bounces' });
  const { metrics } = deps;
  const parser = new ReportParser(overrides.parser);
  parser.onRefused = () => metrics.bounceReportsRefused.inc();
  metrics.bounceReportsWaiting = () => parser.backlog;
  const receiver = new ReportReceiver(deps.db, deps.intake, parser, newOwnerName());
  const listener = !smtp
    ? null
    : new BounceListener({
        host: bounces.host,
        port: bounces.port!,
        domain: bounces.domain!,
        key: deps.key,
        maxBytes: bounces.maxBytes,
        perClientPerMinute: bounces.perClientPerMinute,
        sessionTimeoutMs: bounces.sessionTimeoutMs,
        db: deps.db,
        receiver,
        logger,
      });
  const imap =
    bounces.imap === null
      ? null
      : new ImapIntake({
          config: bounces.imap,
          key: deps.key,
          maxBytes: bounces.maxBytes,
          receiver,
          parser,
          logger,
          firstBackoffMs: overrides.imapBackoffMs,
          maxBackoffMs: overrides.imapMaxBackoffMs,
          onMessage: (outcome) => metrics.bounceImapMessages.inc({ outcome }),
          onConnected: (connected) => metrics.bounceImapConnected.set(connected ? 1 : 0),
        });
  if (imap !== null) metrics.bounceImapConnected.set(0);
  return {
    listener,
    imap,
    parser,
    async start() {
      const port = listener === null ? null : await listener.listen();
      imap?.start();
      return port;
    },
    async close() {
      await listener?.close();
      await imap?.stop();
      await parser.close();
    },
  };
}
