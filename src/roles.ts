import type { BounceReaders, ReaderOverrides } from './bounces/readers.js';
import type { Services } from './compose.js';
import type { OutboundPolicy } from './domain/outbound.js';
import { LeaseQueue } from './queue/lease-queue.js';
import { QueueLoop } from './queue/loop.js';
import { newOwnerName, WorkerPool } from './queue/pool.js';
import { Janitor } from './services/janitor.js';
import { NOTIFICATION_QUEUE, WEBHOOK_QUEUE } from './storage/queue.js';
import { recordCalls, WebhookConsumer } from './webhooks/webhook-consumer.js';
import { MailConsumer } from './worker/mail-consumer.js';
import { recordAttempts } from './worker/outcomes.js';

/**
 * What each role of a process runs over the services (compose.ts): the worker's delivery of mail
 * and webhooks, the bounce readers, and the API role's housekeeping.
 */

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
  // A delete in this process, or any change another connection made where the store can tell
  // (SQLite's data_version, read afresh; PostgreSQL's notices of changes to projects).
  const external = storage.otherCommits ?? storage.externalChanges;
  const projectChanges =
    external === undefined ? undefined : () => `${external()}:${services.projects.changesMade}`;
  const mail = new MailConsumer(
    mailQueue,
    services.loader,
    services.deliverer,
    config.delivery,
    logger,
    projectChanges,
  );
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
  mail.onWebhooksQueued = () => webhookLoop.wake();
  webhooks.onRoom = () => webhookLoop.resume();
  mail.outcomes.onOutcome = ({ projectId, outcome, transport, durationMs }) => {
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
