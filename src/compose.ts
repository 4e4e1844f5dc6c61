import type { Logger } from 'pino';
import { ConfigError, type Config } from './config.js';
import { parseMailbox, type Mailbox } from './domain/address.js';
import { SmtpMailer } from './mail/smtp.js';
import { parseSmtpUrl, type SmtpTarget } from './mail/smtp-target.js';
import { Metrics } from './metrics/metrics.js';
import { SecretBox } from './security/cipher.js';
import { resolveSecretKey } from './security/secret-key.js';
import { AdminService } from './services/admins.js';
import { ApiLogService } from './services/api-log.js';
import { Janitor } from './services/janitor.js';
import { NotificationService } from './services/notifications.js';
import { ProjectService } from './services/projects.js';
import { SmtpSettingsService } from './services/smtp-settings.js';
import { TemplateService } from './services/templates.js';
import { UsageService } from './services/usage.js';
import { openStorage } from './storage/open.js';
import { findProjectById } from './storage/projects.js';
import { findTemplate } from './storage/templates.js';
import { queueStats } from './storage/queue-stats.js';
import type { Storage } from './storage/storage.js';
import { Deliverer } from './worker/deliver.js';
import { DeliveryLoader } from './worker/loader.js';
import { DeliveryWorker } from './worker/worker.js';

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
  readonly smtpSettings: SmtpSettingsService;
  readonly notifications: NotificationService;
  readonly apiLogs: ApiLogService;
  /** Dashboard users, sessions and setup links. */
  readonly admins: AdminService;
  readonly usage: UsageService;
  readonly mailer: SmtpMailer;
  readonly globalSmtp: SmtpTarget | null;
  /** HERALD_SMTP_FROM, parsed. */
  readonly defaultFrom: Mailbox | null;
  /** What the worker reads for a delivery, per claimed batch. */
  readonly loader: DeliveryLoader;
  readonly deliverer: Deliverer;
  readonly metrics: Metrics;
}

export interface OpenOptions {
  readonly migrate?: boolean;
  /** A server process: SQLite checkpoints its WAL from a background thread. */
  readonly longRunning?: boolean;
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
  const defaultFrom = config.smtpFrom === null ? null : parseMailbox(config.smtpFrom);
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
  });
  let secretKey: string;
  try {
    if (options.migrate ?? true) await storage.migrate();
    secretKey = resolveSecretKey(config.secretKey, config.dataDir);
  } catch (error) {
    await storage.close();
    throw error;
  }
  const db = storage.db;
  const projects = new ProjectService(db, config.defaultQuota, { externalChanges: storage.externalChanges });
  const smtpSettings = new SmtpSettingsService(db, projects, new SecretBox(secretKey));
  const mailer = new SmtpMailer({
    timeoutMs: config.delivery.smtpTimeoutMs,
    maxConnections: config.delivery.smtpMaxConnections,
    outbound: config.outbound,
  });
  return {
    config,
    logger,
    storage,
    projects,
    templates: new TemplateService(db, projects),
    smtpSettings,
    notifications: new NotificationService(db, { commitConcurrency: storage.writeConcurrency }),
    apiLogs: new ApiLogService(db, logger),
    admins: new AdminService(db),
    usage: new UsageService(db),
    mailer,
    globalSmtp,
    defaultFrom,
    loader: new DeliveryLoader({
      project: (id) => findProjectById(db, id),
      template: (projectId, name) => findTemplate(db, projectId, name),
      smtp: (projectId) => smtpSettings.forDelivery(projectId),
    }),
    deliverer: new Deliverer({
      mailer,
      globalSmtp,
      production: config.production,
      defaultFrom,
    }),
    metrics: new Metrics(async () => {
      const now = Date.now();
      const stats = await queueStats(db, now);
      return {
        queued: stats.queued,
        sending: stats.sending,
        oldestDueAgeSeconds: stats.oldestDueAt === null ? 0 : (now - stats.oldestDueAt) / 1000,
      };
    }),
  };
}

export function createWorker(services: Services): DeliveryWorker {
  const worker = new DeliveryWorker(
    services.storage,
    services.loader,
    services.deliverer,
    services.config.delivery,
    services.logger.child({ role: 'worker' }),
  );
  const { metrics } = services;
  worker.onOutcome = ({ projectId, outcome, transport, durationMs }) => {
    metrics.delivered.inc({ project_id: String(projectId), outcome, transport: transport ?? 'none' });
    if (transport === 'smtp') metrics.smtpDuration.observe({ outcome }, durationMs / 1000);
  };
  return worker;
}

/** Housekeeping of the api role (retention of API logs and Idempotency-Keys). */
export function createJanitor(services: Services): Janitor {
  return new Janitor(services.storage.db, services.apiLogs, services.config, services.logger);
}

export async function closeServices(services: Services): Promise<void> {
  await services.notifications.flush();
  await services.apiLogs.flush();
  services.mailer.close();
  await services.storage.close();
}
