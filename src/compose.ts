import type { Logger } from 'pino';
import { ConfigError, type Config } from './config.js';
import { parseMailbox, type Mailbox } from './domain/address.js';
import { SmtpMailer } from './mail/smtp.js';
import { parseSmtpUrl, type SmtpTarget } from './mail/smtp-target.js';
import { Metrics } from './metrics/metrics.js';
import { SEALED, SecretBox } from './security/cipher.js';
import { resolveSecretKey } from './security/secret-key.js';
import { checkSecretKey } from './services/secret-check.js';
import { AdminService } from './services/admins.js';
import { AdminTokenService } from './services/admin-tokens.js';
import { AuditLogService } from './services/audit-log.js';
import { ApiLogService } from './services/api-log.js';
import { Janitor } from './services/janitor.js';
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
import type { BounceReaders, ReaderOverrides } from './bounces/readers.js';
import type { OutboundPolicy } from './domain/outbound.js';
import { LeaseQueue } from './queue/lease-queue.js';
import { QueueLoop } from './queue/loop.js';
import { newOwnerName, WorkerPool } from './queue/pool.js';
import { readFiles } from './storage/notification-files.js';
import { NOTIFICATION_QUEUE, WEBHOOK_QUEUE } from './storage/queue.js';
import { recordCalls, WebhookConsumer } from './webhooks/webhook-consumer.js';
import { openStorage } from './storage/open.js';
import { findProjectById } from './storage/projects.js';
import { findCurrentTemplate } from './storage/template-versions.js';
import { queueStats } from './storage/queue-stats.js';
import { listRelayHealth } from './storage/relay-health.js';
import type { Storage } from './storage/storage.js';
import { Deliverer } from './worker/deliver.js';
import { DeliveryLoader } from './worker/loader.js';
import { MailConsumer } from './worker/mail-consumer.js';
import { recordAttempts } from './worker/outcomes.js';

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
  const defaultFrom = config.smtpFrom === null ? null : parseMailbox(config.smtpFrom);
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
  const storage = openStorage(config.database, {
    backgroundCheckpoint: options.longRunning ?? false,
    onCheckpoint: (report) => {
      if (report.error !== undefined)
        logger.warn({ error: report.error }, 'background WAL checkpoint failed');
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
    if (options.migrate ?? true) await storage.migrate();
    secretKey = resolveSecretKey(config.secretKey, config.dataDir);
    await checkSecretKey(storage.db, secretKey, {
      configured: config.secretKey !== null,
      dataDir: config.dataDir,
    });
  } catch (error) {
    await storage.close();
    throw error;
  }
  const db = storage.db;
  const projects = new ProjectService(db, config.defaultQuota, {
    externalChanges: storage.externalChanges,
    changesSettleMs: storage.projectChangesSettleMs,
    updatesSettleMs: storage.projectUpdatesSettleMs,
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
  const accept = new AcceptService(storage);
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
    notifications: new NotificationService(db, webhooksQueued),
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

/** The worker role of a process: mail delivery and webhook delivery under one lease owner. */
export interface Worker {
  readonly owner: string;
  readonly mail: MailConsumer;
  readonly webhooks: WebhookConsumer;
  start(): void;
  stop(): Promise<void>;
  /** New mail may be due (accepted by another process this one heard of). */
  wake(): void;
  /** A webhook delivery may be due (queued by role `all`'s API process). */
  wakeWebhooks(): void;
}

/**
 * The worker role: one lease queue, claim loop and consumer for mail and one for webhooks, under
 * one lease owner and heartbeat. Mail accepted in this process wakes the mail loop; a group of
 * outcomes whose events queued webhook deliveries, or any other delivery queued here (a cancel, a
 * bounce, a test event, a replay), wakes the webhook loop.
 */
export function createWorker(
  services: Services,
  overrides: { readonly outbound?: OutboundPolicy } = {},
): Worker {
  const { config, storage, metrics } = services;
  const logger = services.logger.child({ role: 'worker' });
  const owner = newOwnerName();
  const leases = { owner, leaseMs: config.delivery.leaseMs, logger };
  const loops = { pollMs: config.delivery.pollMs, stopTimeoutMs: config.delivery.stopTimeoutMs };

  const mailQueue = new LeaseQueue(
    storage,
    NOTIFICATION_QUEUE,
    leases,
    recordAttempts(owner, () => webhookLoop.wake()),
  );
  const mail = new MailConsumer(mailQueue, services.loader, services.deliverer, config.delivery, logger);
  const mailLoop = new QueueLoop(storage, NOTIFICATION_QUEUE, mail, loops, logger);

  const webhookLogger = services.logger.child({ role: 'webhooks' });
  const webhookQueue = new LeaseQueue(
    storage,
    WEBHOOK_QUEUE,
    { ...leases, logger: webhookLogger },
    recordCalls(owner),
  );
  const webhooks = new WebhookConsumer(
    webhookQueue,
    {
      openSecret: services.openWebhookSecret,
      outbound: overrides.outbound ?? config.outbound,
      logger: webhookLogger,
    },
    // An endpoint whose last call failed is called again after the poll interval.
    { ...config.webhooks, probeMs: config.delivery.pollMs },
  );
  const webhookLoop = new QueueLoop(storage, WEBHOOK_QUEUE, webhooks, loops, webhookLogger);

  mail.onRoom = () => mailLoop.resume();
  mail.onDue = () => mailLoop.wake();
  webhooks.onRoom = () => webhookLoop.resume();
  mail.onOutcome = ({ projectId, outcome, transport, durationMs }) => {
    metrics.delivered.inc({ project_id: String(projectId), outcome, transport: transport ?? 'none' });
    if (transport === 'smtp') metrics.smtpDuration.observe({ outcome }, durationMs / 1000);
  };
  webhooks.onAttempt = ({ projectId, outcome }) =>
    metrics.webhookDeliveries.inc({ project_id: String(projectId), outcome });
  metrics.relayWindows = () => mail.relayWindows();
  services.accept.onAccepted(() => mailLoop.wake());
  services.webhooks.onQueued(() => webhookLoop.wake());
  storage.onWorkElsewhere?.((table) => (table === 'notifications' ? mailLoop : webhookLoop).wake());

  const pool = new WorkerPool(
    storage,
    owner,
    { leaseMs: config.delivery.leaseMs, pollMs: config.delivery.pollMs },
    logger,
    () => mailQueue.holding + webhookQueue.holding > 0,
  );
  pool.add(mailLoop);
  pool.add(webhookLoop);
  return {
    owner,
    mail,
    webhooks,
    start: () => pool.start(),
    stop: () => pool.stop(),
    wake: () => mailLoop.wake(),
    wakeWebhooks: () => webhookLoop.wake(),
  };
}

/**
 * The bounce readers of role `bounces` (and role all's delivery process); see bounces/readers.ts.
 * Loaded when asked for: the IMAP client and the SMTP server stay out of the processes that do not
 * read bounces.
 */
export async function createBounceReaders(
  services: Services,
  overrides: ReaderOverrides = {},
): Promise<BounceReaders> {
  const { bounceReaders } = await import('./bounces/readers.js');
  return bounceReaders(
    {
      config: services.config.bounces,
      logger: services.logger,
      metrics: services.metrics,
      db: services.storage.db,
      intake: services.bounces,
      key: services.bounceKey,
    },
    overrides,
  );
}

/** Housekeeping of the api role (retention of API and audit logs and Idempotency-Keys). */
export function createJanitor(services: Services): Janitor {
  const { storage } = services;
  return new Janitor(
    storage.db,
    services.apiLogs,
    services.config,
    services.logger,
    undefined,
    () => (storage.forgetErased === undefined ? Promise.resolve(true) : storage.forgetErased()),
    services.auditLog,
  );
}

export async function closeServices(services: Services): Promise<void> {
  await services.accept.flush();
  await services.apiLogs.flush();
  await services.auditLog.flush();
  services.mailer.close();
  await services.storage.close();
}
