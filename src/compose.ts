import type { Logger } from 'pino';
import { ConfigError, type Config } from './config.js';
import { parseMailbox, type Mailbox } from './domain/address.js';
import { SmtpMailer } from './mail/smtp.js';
import { parseSmtpUrl, type SmtpTarget } from './mail/smtp-target.js';
import { SecretBox } from './security/cipher.js';
import { resolveSecretKey } from './security/secret-key.js';
import { ApiLogService } from './services/api-log.js';
import { NotificationService } from './services/notifications.js';
import { ProjectService } from './services/projects.js';
import { SmtpSettingsService } from './services/smtp-settings.js';
import { TemplateService } from './services/templates.js';
import { openStorage } from './storage/open.js';
import type { Storage } from './storage/storage.js';
import { Deliverer } from './worker/deliver.js';
import { DeliveryWorker } from './worker/worker.js';

/**
 * Wires Herald together by hand: one storage backend, the services over it, and the mail side.
 * The HTTP app, the worker, the dashboard and the CLI all use these same services.
 */
export interface Services {
  readonly config: Config;
  readonly logger: Logger;
  readonly storage: Storage;
  readonly secretKey: string;
  readonly projects: ProjectService;
  readonly templates: TemplateService;
  readonly smtpSettings: SmtpSettingsService;
  readonly notifications: NotificationService;
  readonly apiLogs: ApiLogService;
  readonly mailer: SmtpMailer;
  readonly globalSmtp: SmtpTarget | null;
  /** HERALD_SMTP_FROM, parsed. */
  readonly defaultFrom: Mailbox | null;
  readonly deliverer: Deliverer;
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
  const storage = openStorage(config.database, {
    backgroundCheckpoint: options.longRunning ?? false,
    onCheckpoint: (report) => {
      if (report.error !== undefined)
        logger.warn({ error: report.error }, 'background WAL checkpoint failed');
    },
  });
  try {
    if (options.migrate ?? true) await storage.migrate();
  } catch (error) {
    await storage.close();
    throw error;
  }
  const secretKey = resolveSecretKey(config.secretKey, config.dataDir);
  const db = storage.db;
  const projects = new ProjectService(db, config.defaultQuota, { externalChanges: storage.externalChanges });
  const smtpSettings = new SmtpSettingsService(db, projects, new SecretBox(secretKey));
  const mailer = new SmtpMailer({
    timeoutMs: config.delivery.smtpTimeoutMs,
    maxConnections: config.delivery.smtpMaxConnections,
  });
  const globalSmtp = config.smtpUrl === null ? null : parseSmtpUrl(config.smtpUrl);
  const defaultFrom = config.smtpFrom === null ? null : parseMailbox(config.smtpFrom);
  if (config.smtpFrom !== null && defaultFrom === null) {
    await storage.close();
    throw new ConfigError(
      'HERALD_SMTP_FROM must be an address, e.g. no-reply@example.org or "Shop <no-reply@example.org>"',
    );
  }
  return {
    config,
    logger,
    storage,
    secretKey,
    projects,
    templates: new TemplateService(db, projects),
    smtpSettings,
    // SQLite has one writer; PostgreSQL commits several accepted batches in parallel.
    notifications: new NotificationService(db, { commitConcurrency: storage.kind === 'postgres' ? 4 : 1 }),
    apiLogs: new ApiLogService(db, logger),
    mailer,
    globalSmtp,
    defaultFrom,
    deliverer: new Deliverer({
      db,
      smtpSettings,
      mailer,
      globalSmtp,
      captureWhenUnconfigured: !config.production,
      defaultFrom,
    }),
  };
}

export function createWorker(services: Services): DeliveryWorker {
  return new DeliveryWorker(
    services.storage,
    services.deliverer,
    services.config.delivery,
    services.logger.child({ role: 'worker' }),
  );
}

export async function closeServices(services: Services): Promise<void> {
  await services.notifications.flush();
  await services.apiLogs.flush();
  services.mailer.close();
  await services.storage.close();
}
