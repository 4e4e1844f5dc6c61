import type { Logger } from 'pino';
import { Trouble } from './logger.js';
import { ConfigError, type Config } from './config.js';
import { parseGivenMailbox, type Mailbox } from './domain/address.js';
import { SmtpMailer } from './mail/smtp.js';
import { parseSmtpUrl, relayKey, type SmtpTarget } from './mail/smtp-target.js';
import { Metrics } from './metrics/metrics.js';
import { SEALED, SecretBox } from './security/cipher.js';
import { resolveSecretKey } from './services/secret-check.js';
import { AdminService } from './services/admins.js';
import { AdminTokenService } from './services/admin-tokens.js';
import { AuditLogService } from './services/audit-log.js';
import { ApiLogService } from './services/api-log.js';
import { AcceptService } from './services/accept.js';
import { NotificationService } from './services/notifications.js';
import { ProjectService } from './services/projects.js';
import { SmtpSettingsService } from './services/smtp-settings.js';
import { Signal } from './services/signal.js';
import { TemplateService } from './services/templates.js';
import { LayoutService } from './services/layouts.js';
import { UsageService } from './services/usage.js';
import { SuppressionService } from './services/suppressions.js';
import { WebhookService } from './services/webhooks.js';
import { bounceKey, returnPath } from './bounces/token.js';
import { BounceIntake } from './bounces/intake.js';
import { readFiles } from './storage/notification-files.js';
import { openStorage } from './storage/open.js';
import { findProjectById } from './storage/projects.js';
import { findCurrentTemplate } from './storage/template-versions.js';
import { queueStats } from './storage/queue-stats.js';
import { listRelayHealth } from './storage/relay-health.js';
import type { Storage } from './storage/storage.js';
import { Deliverer } from './worker/deliver.js';
import { DeliveryLoader } from './worker/loader.js';

/**
 * Wires Herald together by hand: one storage backend, the services over it, and the mail side.
 * The HTTP app, the worker, the dashboard and the CLI all use these same services.
 */
export interface Services {
  readonly config: Config;
  readonly logger: Logger;
  readonly storage: Storage;
  readonly projects: ProjectService;
  readonly templates: TemplateService;
  readonly layouts: LayoutService;
  readonly smtpSettings: SmtpSettingsService;
  /** Accepting sends: the group commit of the API. */
  readonly accept: AcceptService;
  readonly notifications: NotificationService;
  readonly apiLogs: ApiLogService;
  /** Dashboard users, sessions and setup links. */
  readonly admins: AdminService;
  /** Tokens of the management API (/api/v1/admin), and the audit log of its calls. */
  readonly adminTokens: AdminTokenService;
  readonly auditLog: AuditLogService;
  readonly usage: UsageService;
  readonly webhooks: WebhookService;
  readonly suppressions: SuppressionService;
  readonly bounces: BounceIntake;
  /** Decrypts a webhook endpoint's stored secret (the webhook consumer signs with it). */
  readonly openWebhookSecret: (sealed: string) => string;
  /** The bounce token MAC key, derived from the instance secret. */
  readonly bounceKey: Buffer;
  readonly mailer: SmtpMailer;
  readonly globalSmtp: SmtpTarget | null;
  /** HERALD_SMTP_FROM, parsed. */
  readonly defaultFrom: Mailbox | null;
  /** What the worker reads for a delivery, per claimed batch. */
  readonly loader: DeliveryLoader;
  readonly deliverer: Deliverer;
  readonly metrics: Metrics;
}

/** An operator's relay from the environment: trusted, as HERALD_SMTP_URL is (product.md §8). */
function globalRelay(url: string | null, name: string): SmtpTarget | null {
  try {
    return url === null ? null : { ...parseSmtpUrl(url), trusted: true };
  } catch (error) {
    throw new ConfigError(`${name}: ${(error as Error).message}`);
  }
}

/**
 * Each message's envelope sender: `bounces+<token>@HERALD_BOUNCE_DOMAIN` when the listener's domain
 * is set, else `<local>+<token>@<domain>` of the watched mailbox's address (plus-addressing).
 */
function returnPathOf(config: Config, key: Buffer): ((id: number) => string) | null {
  const { domain, imap } = config.bounces;
  if (domain !== null) return (id) => returnPath(key, id, domain);
  if (imap !== null) return (id) => returnPath(key, id, imap.address.domain, imap.address.local);
  return null;
}

export interface OpenOptions {
  readonly migrate?: boolean;
  /** A server process: SQLite checkpoints its WAL from a background thread. */
  readonly longRunning?: boolean;
  /**
   * A server process that answers the API: it keeps API keys in memory, and on PostgreSQL listens
   * for project changes (one connection) to know when to drop them.
   */
  readonly servesApi?: boolean;
  /**
   * A process that delivers: on PostgreSQL it listens (on the same connection) for other
   * processes' notices of queued work, and claims at once instead of at its next poll.
   */
  readonly delivers?: boolean;
  /**
   * PostgreSQL: how often the connection listening for project changes is checked (1 s); a key
   * rotation waits a little over twice this. The same in every process of a deployment.
   */
  readonly projectChangesCheckMs?: number;
  /**
   * PostgreSQL: the token this process's notices of queued work carry, and which notices it takes
   * for its own (storage/postgres/work-notices.ts). Role all gives its delivery child its own.
   */
  readonly noticeToken?: string;
}

export async function openServices(
  config: Config,
  logger: Logger,
  options: OpenOptions = {},
): Promise<Services> {
  // Settings that can still be wrong are read before anything is opened, so a bad one fails
  // start-up with its own message and leaves nothing running.
  let globalSmtp: SmtpTarget | null = null;
  try {
    globalSmtp = config.smtpUrl === null ? null : { ...parseSmtpUrl(config.smtpUrl), trusted: true };
  } catch (error) {
    throw new ConfigError(`HERALD_SMTP_URL: ${(error as Error).message}`);
  }
  const globalFallback = globalRelay(config.smtpFallbackUrl, 'HERALD_SMTP_FALLBACK_URL');
  if (globalSmtp !== null && globalFallback !== null && relayKey(globalFallback) === relayKey(globalSmtp))
    throw new ConfigError(
      `HERALD_SMTP_FALLBACK_URL is the relay of HERALD_SMTP_URL (${relayKey(globalSmtp)}): ` +
        'a fallback must be another host or port',
    );
  const defaultFrom = config.smtpFrom === null ? null : parseGivenMailbox(config.smtpFrom);
  let listenerFailed = false;
  // What the listening connection (PostgreSQL) is for in this process, and what its loss costs.
  const listening = [
    ...(options.servesApi ? [['project changes', 'API keys are looked up in the database']] : []),
    ...(options.delivers ? [['queued work', 'work queued elsewhere is found at the poll']] : []),
  ];
  if (config.smtpFrom !== null && defaultFrom === null) {
    throw new ConfigError(
      'HERALD_SMTP_FROM must be an address, e.g. no-reply@example.org or "Shop <no-reply@example.org>"',
    );
  }
  // Tried every second: a full disk is a line when it begins and when it ends, not two a second.
  const checkpointTrouble = new Trouble(logger, 'background WAL checkpoint');
  const storage = openStorage(config.database, {
    backgroundCheckpoint: options.longRunning ?? false,
    onCheckpoint: (report) => {
      if (report.error === undefined) checkpointTrouble.succeeded();
      else checkpointTrouble.failed(new Error(report.error), 'tried again every second');
    },
    watchProjects: options.servesApi ?? false,
    watchWork: options.delivers ?? false,
    projectChangesCheckMs: options.projectChangesCheckMs,
    noticeToken: options.noticeToken,
    onProjectChanges: (state) => {
      const what = listening.map(([notices]) => notices).join(' and ');
      if (!state.listening)
        logger.warn(
          { error: state.error.message },
          `not listening for ${what}; ${listening.map(([, meanwhile]) => meanwhile).join(', ')} until it is back`,
        );
      else if (listenerFailed) logger.info(`listening for ${what} again`);
      listenerFailed = !state.listening;
    },
    onWorkNotices: (state) => {
      if (!state.sending)
        logger.warn(
          { error: state.error.message },
          'cannot tell other processes of queued work; their workers find it at their poll until this is back',
        );
      else logger.info('telling other processes of queued work again');
    },
  });
  let secretKey: string;
  try {
    const applied = options.migrate === false ? [] : await storage.migrate();
    if (applied.length > 0)
      logger.info(
        { applied },
        `database schema upgraded (${applied.length} migration${applied.length === 1 ? '' : 's'})`,
      );
    secretKey = await resolveSecretKey(storage.db, { configured: config.secretKey, dataDir: config.dataDir });
  } catch (error) {
    await storage.close();
    throw error;
  }
  const db = storage.db;
  const accept = new AcceptService(storage);
  const projects = new ProjectService(db, config.defaultQuota, {
    externalChanges: storage.externalChanges,
    changesSettleMs: storage.projectChangesSettleMs,
    updatesSettleMs: storage.projectUpdatesSettleMs,
    onDeleted: () => accept.wakeWorkers(),
  });
  const smtpSettings = new SmtpSettingsService(db, projects, new SecretBox(secretKey), {
    globals: { primary: globalSmtp, fallback: globalFallback },
    outbound: config.outbound,
  });
  const webhookSecrets = new SecretBox(secretKey, SEALED.webhookSecret);
  const tokenKey = bounceKey(secretKey);
  const bounceReturnPath = returnPathOf(config, tokenKey);
  const mailer = new SmtpMailer({
    timeoutMs: config.delivery.smtpTimeoutMs,
    outbound: config.outbound,
  });
  const metrics = new Metrics(
    async () => {
      const now = Date.now();
      const stats = await queueStats(db, now);
      return {
        queued: stats.queued,
        sending: stats.sending,
        oldestDueAgeSeconds: stats.oldestDueAt === null ? 0 : (now - stats.oldestDueAt) / 1000,
      };
    },
    // What every worker knows of the relays, from the database: the same in every process.
    async () => new Map((await listRelayHealth(db)).map((row) => [row.relay, row.down_since === null])),
  );
  const apiLogs = new ApiLogService(db, logger, {
    onDrop: (kind) => metrics.apiLogDropped.inc({ kind }),
  });
  metrics.apiLogBuffered = () => apiLogs.buffered;
  const webhooksQueued = new Signal((err) => logger.error({ err }, 'waking the webhook lanes failed'));
  // Workers in other processes hear of work queued here where they cannot see it for themselves.
  accept.onAccepted(() => storage.announceWork?.('notifications'));
  webhooksQueued.on(() => storage.announceWork?.('webhook_deliveries'));
  return {
    config,
    logger,
    storage,
    projects,
    templates: new TemplateService(db, projects),
    layouts: new LayoutService(db, projects),
    smtpSettings,
    accept,
    notifications: new NotificationService(db, { webhooksQueued, wakeWorkers: () => accept.wakeWorkers() }),
    apiLogs,
    admins: new AdminService(db, Date.now, (outcome) => metrics.dashboardLogins.inc({ outcome })),
    adminTokens: new AdminTokenService(db),
    auditLog: new AuditLogService(db, logger),
    usage: new UsageService(db),
    webhooks: new WebhookService(db, projects, webhookSecrets, config.outbound, webhooksQueued),
    suppressions: new SuppressionService(db, projects),
    bounces: new BounceIntake(db, webhooksQueued),
    openWebhookSecret: (sealed) => webhookSecrets.open(sealed),
    bounceKey: tokenKey,
    mailer,
    globalSmtp,
    defaultFrom,
    loader: new DeliveryLoader({
      project: (id) => findProjectById(db, id),
      template: (projectId, name) => findCurrentTemplate(db, projectId, name),
      smtp: (projectId) => smtpSettings.forDelivery(projectId),
    }),
    deliverer: new Deliverer({
      mailer,
      globalSmtp,
      globalFallback,
      production: config.production,
      defaultFrom,
      returnPath: bounceReturnPath,
      files: (id) => readFiles(db, id),
    }),
    metrics,
  };
}

export async function closeServices(services: Services): Promise<void> {
  await services.accept.flush();
  await services.apiLogs.flush();
  await services.auditLog.flush();
  services.mailer.close();
  await services.storage.close();
}
