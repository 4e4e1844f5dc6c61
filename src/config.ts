import { isIP } from 'node:net';
import path from 'node:path';
import { isFolderName, parseImapUrl, type ImapSettings } from './domain/imap-url.js';
import { parseOutboundAllow, type OutboundPolicy } from './domain/outbound.js';
import {
  isQuotaPeriod,
  MAX_QUOTA_LIMIT,
  parseQuotaLimit as parseQuota,
  QUOTA_PERIODS,
  type QuotaPeriod,
} from './domain/quota.js';

/**
 * Herald's configuration, parsed and validated once from the environment. This module is the only
 * reader of `process.env`; everything else receives a frozen Config.
 */

export type Role = 'all' | 'api' | 'worker' | 'bounces';

export type DatabaseConfig =
  | { readonly kind: 'sqlite'; readonly file: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly poolSize: number };

export interface Config {
  readonly production: boolean;
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly database: DatabaseConfig;
  /** Global default SMTP server, used by projects without SMTP settings of their own. */
  readonly smtpUrl: string | null;
  /** HERALD_SMTP_FALLBACK_URL: takes the global relay's mail when it fails or is down (product.md §10). */
  readonly smtpFallbackUrl: string | null;
  /** Sender (`addr` or `Name <addr>`) for projects that name none; checked where it is parsed. */
  readonly smtpFrom: string | null;
  /** From HERALD_SECRET_KEY; null means "generate or load one from the data dir" (never in production). */
  readonly secretKey: string | null;
  /** HERALD_LOG_LEVEL; null leaves the default to the process: info for a server, warn for the CLI. */
  readonly logLevel: string | null;
  readonly delivery: {
    readonly maxAttempts: number;
    readonly retryBaseMs: number;
    /** How long a claimed message stays invisible to other workers unless its lease is renewed. */
    readonly leaseMs: number;
    /** Messages claimed per query; a batch claim is far cheaper than one claim per message. */
    readonly batchSize: number;
    /** Idle poll interval; the in-process API also wakes the worker directly. */
    readonly pollMs: number;
    /** Concurrent SMTP transactions per worker process. */
    readonly concurrency: number;
    /**
     * Most connections (transactions in flight) per SMTP relay and worker process; the number in
     * use adapts below it to the relay's answers (domain/relay-window.ts). 20 is Postfix's
     * default_destination_concurrency_limit.
     */
    readonly smtpMaxConnections: number;
    readonly smtpTimeoutMs: number;
    /** Longest a graceful stop waits for SMTP transactions in flight. */
    readonly stopTimeoutMs: number;
  };
  readonly defaultQuota: { readonly limit: number | null; readonly period: QuotaPeriod };
  readonly apiLog: { readonly retentionDays: number; readonly maxRows: number };
  /** Days a finished notification keeps its placeholder values and rendered content. */
  readonly contentRetentionDays: number;
  /** Public URL of the dashboard, used in the printed setup link. */
  readonly publicUrl: string | null;
  /** Connections one HTTP client (an IPv4 address or IPv6 /64) may hold open at once; 0: no cap. */
  readonly httpMaxConnectionsPerClient: number;
  /** HERALD_ADMIN_RATE_LIMIT: management API calls per minute per admin token and api process. */
  readonly adminRateLimit: number;
  /** HERALD_METRICS_TOKEN: bearer token for `GET /metrics`; required there in production. */
  readonly metricsToken: string | null;
  /** Where a project's relay may be: internal addresses only via HERALD_OUTBOUND_ALLOW in production. */
  readonly outbound: OutboundPolicy;
  readonly webhooks: {
    /** Attempts per delivery before it is marked failed; the default spans more than a day. */
    readonly maxAttempts: number;
    /** Delay before the second attempt; it doubles each time up to six hours. */
    readonly retryBaseMs: number;
    /** No answer within this time is a failed attempt (product.md §5: 10 s). */
    readonly timeoutMs: number;
    /** Webhook calls in flight per worker process, in lanes of their own (never mail's). */
    readonly concurrency: number;
    /** Calls in flight per endpoint and worker process. */
    readonly perEndpoint: number;
    /** Days finished events, their deliveries and attempts are kept (shown in the dashboard). */
    readonly retentionDays: number;
  };
  readonly bounces: {
    /** HERALD_BOUNCE_DOMAIN: messages go out with Return-Path `bounces+<token>@` this domain. */
    readonly domain: string | null;
    /** HERALD_BOUNCE_SMTP_PORT: the inbound listener's port; role `all` runs it when set. */
    readonly port: number | null;
    readonly host: string;
    /** Largest report accepted, in bytes. */
    readonly maxBytes: number;
    /** Messages per minute accepted from one client address. */
    readonly perClientPerMinute: number;
    /** HERALD_BOUNCE_SESSION_TIMEOUT_MS: the longest an SMTP connection to the listener stays open. */
    readonly sessionTimeoutMs: number;
    /** HERALD_BOUNCE_IMAP_URL and its settings: a mailbox watched for reports (product.md §9). */
    readonly imap: ImapIntakeConfig | null;
  };
}

export interface ImapIntakeConfig extends ImapSettings {
  /** HERALD_BOUNCE_IMAP_DONE: where read reports go. */
  readonly doneFolder: string;
  /** Where mail that is not a report (or is refused) goes. */
  readonly unrecognizedFolder: string;
  /** The mailbox's address, for the Return-Path `<local>+<token>@<domain>`. */
  readonly address: { readonly local: string; readonly domain: string };
  /** HERALD_BOUNCE_IMAP_POLL_MS: how often a server without IDLE is asked for new mail. */
  readonly pollMs: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** The environment keeps a server from starting (a taken port, a data directory it cannot write). */
export class StartupError extends Error {
  override name = 'StartupError';
}

type Env = Readonly<Record<string, string | undefined>>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}`);
  return value;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(env: Env): string | null {
  const raw = env.HERALD_LOG_LEVEL;
  if (raw === undefined || raw === '') return null;
  if (!LOG_LEVELS.includes(raw))
    throw new ConfigError(`HERALD_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  return raw;
}

// A host name's labels (RFC 1123): letters, digits and inner hyphens, at most 63 characters each.
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** An address to listen on: an IP address or a host name; checked before anything resolves it. */
function listenHost(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  // Digits and dots only is meant as an IPv4 address: `999.1.1.1` is none, not a name to look up.
  if (isIP(raw) === 0 && (!HOST_NAME.test(raw) || /^[\d.]+$/.test(raw)))
    throw new ConfigError(
      `${name} must be an IP address or a host name to listen on, such as 127.0.0.1 or 0.0.0.0`,
    );
  return raw;
}

export function parseQuotaLimit(raw: string, name = 'quota'): number | null {
  const limit = parseQuota(raw);
  if (limit === undefined)
    throw new ConfigError(`${name} must be a whole number up to ${MAX_QUOTA_LIMIT} or "unlimited"`);
  return limit;
}

export function parseQuotaPeriod(raw: string, name = 'quota period'): QuotaPeriod {
  if (isQuotaPeriod(raw)) return raw;
  throw new ConfigError(`${name} must be one of ${QUOTA_PERIODS.join(', ')}`);
}

function database(env: Env, dataDir: string): DatabaseConfig {
  const raw = env.HERALD_DATABASE_URL;
  if (raw === undefined || raw === '') return { kind: 'sqlite', file: path.join(dataDir, 'herald.db') };
  if (/^postgres(ql)?:\/\//.test(raw)) {
    return { kind: 'postgres', url: raw, poolSize: integer(env, 'HERALD_DATABASE_POOL_SIZE', 10, 1, 1000) };
  }
  if (raw.startsWith('sqlite:')) {
    const rest = raw.slice('sqlite:'.length).replace(/^\/\//, '');
    if (rest === '') throw new ConfigError('HERALD_DATABASE_URL sqlite: needs a file path');
    return { kind: 'sqlite', file: path.resolve(rest) };
  }
  if (/^[a-z]+:\/\//i.test(raw)) {
    throw new ConfigError('HERALD_DATABASE_URL must be postgres://…, sqlite:PATH or a file path');
  }
  return { kind: 'sqlite', file: path.resolve(raw) };
}

const DOMAIN = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/i;

function bounceDomain(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  if (!DOMAIN.test(raw))
    throw new ConfigError(
      `HERALD_BOUNCE_DOMAIN must be a domain name such as bounces.example.com, got ${JSON.stringify(raw)}`,
    );
  return raw.toLowerCase();
}

/** Where mail that is not a report is moved (product.md §9). */
export const UNRECOGNIZED_FOLDER = 'Herald/Unrecognized';

function bounceAddress(raw: string, from: string): { local: string; domain: string } {
  const at = raw.lastIndexOf('@');
  const local = raw.slice(0, at);
  const domain = raw.slice(at + 1);
  if (local.includes('+'))
    throw new ConfigError(`${from} must not contain '+': Herald adds +<token> to it for each message`);
  if (at <= 0 || !/^[A-Za-z0-9!#$%&'*/=?^_`{|}~.-]{1,64}$/.test(local) || !DOMAIN.test(domain))
    throw new ConfigError(
      `${from} must be an address such as bounces@example.com, got ${JSON.stringify(raw)}`,
    );
  return { local, domain: domain.toLowerCase() };
}

function imapIntake(env: Env): ImapIntakeConfig | null {
  const raw = env.HERALD_BOUNCE_IMAP_URL;
  if (raw === undefined || raw === '') return null;
  let settings: ImapSettings;
  try {
    settings = parseImapUrl(raw);
  } catch (error) {
    throw new ConfigError(`HERALD_BOUNCE_IMAP_URL ${(error as Error).message}`);
  }
  const address = env.HERALD_BOUNCE_ADDRESS
    ? bounceAddress(env.HERALD_BOUNCE_ADDRESS, 'HERALD_BOUNCE_ADDRESS')
    : settings.user.includes('@')
      ? bounceAddress(settings.user, "HERALD_BOUNCE_IMAP_URL's user name (or set HERALD_BOUNCE_ADDRESS)")
      : null;
  if (address === null)
    throw new ConfigError(
      "HERALD_BOUNCE_ADDRESS is needed: the user name of HERALD_BOUNCE_IMAP_URL is not the mailbox's address",
    );
  const doneFolder = env.HERALD_BOUNCE_IMAP_DONE || 'Herald/Processed';
  if (!isFolderName(doneFolder))
    throw new ConfigError(`HERALD_BOUNCE_IMAP_DONE must be a folder name such as Herald/Processed`);
  const folders = [settings.mailbox, doneFolder, UNRECOGNIZED_FOLDER].map((f) => f.toLowerCase());
  if (new Set(folders).size < 3)
    throw new ConfigError(
      `HERALD_BOUNCE_IMAP_DONE must differ from the watched mailbox and from ${UNRECOGNIZED_FOLDER}`,
    );
  return {
    ...settings,
    doneFolder,
    unrecognizedFolder: UNRECOGNIZED_FOLDER,
    address,
    pollMs: integer(env, 'HERALD_BOUNCE_IMAP_POLL_MS', 60_000, 100, 3_600_000),
  };
}

function outboundAllow(raw: string): OutboundPolicy['allow'] {
  try {
    return parseOutboundAllow(raw);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

/**
 * HERALD_PUBLIC_URL: the dashboard's address as people reach it, kept as its origin and path
 * without a trailing slash (`HTTPS://Herald.example/` is `https://herald.example`), so every use
 * of it (secure cookies, the Origin check, the setup link) reads the same value.
 */
function publicUrl(raw: string | null): string | null {
  if (raw === null) return null;
  let url: URL | null;
  try {
    url = new URL(raw);
  } catch {
    url = null;
  }
  if (
    url === null ||
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.username !== '' ||
    url.password !== '' ||
    url.search !== '' ||
    url.hash !== ''
  )
    throw new ConfigError(
      `HERALD_PUBLIC_URL must be the dashboard's http:// or https:// address, e.g. https://herald.example.com, got ${JSON.stringify(raw)}`,
    );
  return url.origin + url.pathname.replace(/\/+$/, '');
}

export function loadConfig(env: Env = process.env): Config {
  const production = env.NODE_ENV === 'production';
  const dataDir = path.resolve(env.HERALD_DATA_DIR || './data');
  const secretKey = env.HERALD_SECRET_KEY || null;
  if (secretKey !== null && secretKey.length < 32) {
    throw new ConfigError('HERALD_SECRET_KEY must be at least 32 characters (64 hex characters recommended)');
  }
  if (production && secretKey === null) {
    throw new ConfigError('HERALD_SECRET_KEY is required when NODE_ENV=production');
  }
  const smtpUrl = env.HERALD_SMTP_URL || null;
  if (smtpUrl !== null && !/^smtps?:\/\//.test(smtpUrl)) {
    throw new ConfigError('HERALD_SMTP_URL must start with smtp:// or smtps://');
  }
  const smtpFallbackUrl = env.HERALD_SMTP_FALLBACK_URL || null;
  if (smtpFallbackUrl !== null && !/^smtps?:\/\//.test(smtpFallbackUrl))
    throw new ConfigError('HERALD_SMTP_FALLBACK_URL must start with smtp:// or smtps://');
  if (smtpFallbackUrl !== null && smtpUrl === null)
    throw new ConfigError('HERALD_SMTP_FALLBACK_URL needs HERALD_SMTP_URL: it is the fallback of that relay');
  const config: Config = {
    production,
    port: integer(env, env.HERALD_PORT ? 'HERALD_PORT' : 'PORT', 3000, 0, 65535),
    host: listenHost(env, 'HERALD_HOST', production ? '0.0.0.0' : '127.0.0.1'),
    dataDir,
    database: database(env, dataDir),
    smtpUrl,
    smtpFallbackUrl,
    smtpFrom: env.HERALD_SMTP_FROM || null,
    secretKey,
    logLevel: logLevel(env),
    delivery: {
      maxAttempts: integer(env, 'HERALD_DELIVERY_MAX_ATTEMPTS', 5, 1, 100),
      retryBaseMs: integer(env, 'HERALD_DELIVERY_RETRY_BASE_MS', 30_000, 1, 86_400_000),
      leaseMs: integer(env, 'HERALD_DELIVERY_LEASE_MS', 120_000, 500, 3_600_000),
      batchSize: integer(env, 'HERALD_DELIVERY_BATCH_SIZE', 100, 1, 1000),
      pollMs: integer(env, 'HERALD_DELIVERY_POLL_MS', 500, 10, 60_000),
      // Room for one relay's whole window (20) beside the reserved quarter (13) of the lanes.
      concurrency: integer(env, 'HERALD_DELIVERY_CONCURRENCY', 50, 1, 500),
      smtpMaxConnections: integer(env, 'HERALD_SMTP_MAX_CONNECTIONS', 20, 1, 100),
      smtpTimeoutMs: integer(env, 'HERALD_SMTP_TIMEOUT_MS', 30_000, 100, 600_000),
      stopTimeoutMs: integer(env, 'HERALD_STOP_TIMEOUT_MS', 20_000, 0, 600_000),
    },
    defaultQuota: {
      limit: parseQuotaLimit(env.HERALD_DEFAULT_QUOTA || '10000', 'HERALD_DEFAULT_QUOTA'),
      period: parseQuotaPeriod(env.HERALD_DEFAULT_QUOTA_PERIOD || 'month', 'HERALD_DEFAULT_QUOTA_PERIOD'),
    },
    contentRetentionDays: integer(env, 'HERALD_CONTENT_RETENTION_DAYS', 30, 0, 3650),
    apiLog: {
      retentionDays: integer(env, 'HERALD_API_LOG_RETENTION_DAYS', 30, 1, 3650),
      maxRows: integer(env, 'HERALD_API_LOG_MAX_ROWS', 1_000_000, 1000, 1_000_000_000),
    },
    publicUrl: publicUrl(env.HERALD_PUBLIC_URL || null),
    metricsToken: env.HERALD_METRICS_TOKEN || null,
    // Ten a second: a CI job deploying a hundred templates takes seconds, a runaway loop is held.
    adminRateLimit: integer(env, 'HERALD_ADMIN_RATE_LIMIT', 600, 1, 1_000_000),
    httpMaxConnectionsPerClient: integer(env, 'HERALD_HTTP_MAX_CONNECTIONS_PER_CLIENT', 100, 0, 1_000_000),
    outbound: { enforce: production, allow: outboundAllow(env.HERALD_OUTBOUND_ALLOW ?? '') },
    webhooks: {
      maxAttempts: integer(env, 'HERALD_WEBHOOK_MAX_ATTEMPTS', 16, 1, 100),
      retryBaseMs: integer(env, 'HERALD_WEBHOOK_RETRY_BASE_MS', 10_000, 1, 86_400_000),
      timeoutMs: integer(env, 'HERALD_WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
      concurrency: integer(env, 'HERALD_WEBHOOK_CONCURRENCY', 16, 1, 500),
      perEndpoint: integer(env, 'HERALD_WEBHOOK_ENDPOINT_CONCURRENCY', 4, 1, 100),
      retentionDays: integer(env, 'HERALD_WEBHOOK_RETENTION_DAYS', 30, 1, 3650),
    },
    bounces: {
      domain: bounceDomain(env.HERALD_BOUNCE_DOMAIN),
      port: env.HERALD_BOUNCE_SMTP_PORT ? integer(env, 'HERALD_BOUNCE_SMTP_PORT', 0, 0, 65535) : null,
      host: listenHost(
        env,
        'HERALD_BOUNCE_SMTP_HOST',
        listenHost(env, 'HERALD_HOST', production ? '0.0.0.0' : '127.0.0.1'),
      ),
      maxBytes: integer(env, 'HERALD_BOUNCE_MAX_BYTES', 1024 * 1024, 1024, 50 * 1024 * 1024),
      perClientPerMinute: integer(env, 'HERALD_BOUNCE_RATE_PER_MINUTE', 60, 1, 100_000),
      sessionTimeoutMs: integer(env, 'HERALD_BOUNCE_SESSION_TIMEOUT_MS', 60_000, 1_000, 3_600_000),
      imap: imapIntake(env),
    },
  };
  if (config.bounces.port !== null && config.bounces.domain === null)
    throw new ConfigError(
      'HERALD_BOUNCE_SMTP_PORT needs HERALD_BOUNCE_DOMAIN: the listener accepts mail only for that domain',
    );
  return Object.freeze(config);
}

/**
 * The environment of a CLI command: `--data-dir` overrides HERALD_DATA_DIR (and with it the default
 * SQLite file), so an operator can point any command at a server's data from anywhere.
 */
export function cliEnvironment(dataDir: string | undefined, env: Env = process.env): Env {
  return dataDir === undefined || dataDir === '' ? env : { ...env, HERALD_DATA_DIR: dataDir };
}
