import type { FastifyInstance } from 'fastify';
import { accessSync, constants } from 'node:fs';
import { ConfigError, StartupError, type Config, type Role } from './config.js';
import { closeServices, openServices, type Services } from './compose.js';
import { createBounceReaders, createJanitor, createWorker, type Worker } from './roles.js';
import type { BounceReaders } from './bounces/readers.js';
import { chooseTransport } from './domain/delivery-plan.js';
import { buildApp } from './http/app.js';
import { DEFAULT_CLIENT_LIMITS } from './http/client-limits.js';
import { urlHost } from './domain/url-host.js';
import { describeImap } from './domain/imap-url.js';
import { describeSmtpTarget } from './mail/smtp-target.js';
import type { HttpPlugin } from './http/plugin.js';
import type { Janitor } from './services/janitor.js';
import { makeDirectory } from './storage/directory.js';
import { newNoticeToken } from './storage/postgres/work-notices.js';
import { countProjectSmtpSettings } from './storage/smtp-settings.js';
import type { Logger } from 'pino';
import type { Metrics } from './metrics/metrics.js';
import {
  WorkerProcess,
  type MetricsReply,
  type MetricsRequest,
  type ReadyMessage,
  type WakeMessage,
  type WorkerProcessSpawn,
} from './worker-process.js';

export interface RunningServer {
  readonly services: Services;
  readonly app: FastifyInstance | null;
  readonly worker: Worker | null;
  /** The bound address of the HTTP server, when the role serves HTTP. */
  readonly url: string | null;
  /** The bound port of the bounce listener, when this process runs it. */
  readonly bouncePort: number | null;
  stop(): Promise<void>;
}

/** What the start-up line says about mail: the default transport and how many projects have their own. */
async function describeTransport(services: Services): Promise<string> {
  const own = await countProjectSmtpSettings(services.storage.db);
  const projects =
    own === 0 ? '' : `; ${own === 1 ? '1 project has its' : `${own} projects have their`} own SMTP settings`;
  const choice = chooseTransport(null, services.globalSmtp, services.config.production);
  if (choice.kind === 'global')
    return `SMTP ${describeSmtpTarget(choice.target)} (HERALD_SMTP_URL)${projects}`;
  if (choice.kind === 'none')
    return `no default: set HERALD_SMTP_URL or per-project SMTP settings (sends without either fail)${projects}`;
  return own === 0
    ? 'capture (no SMTP configured: messages are rendered and stored, not sent)'
    : `capture for projects without SMTP settings${projects}`;
}

/** The data directory holds the generated secret and the embedded database: it must be writable. */
function checkDataDir(dir: string): void {
  try {
    makeDirectory(dir, 0o700);
    accessSync(dir, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new StartupError(`the data directory ${dir} is not writable (${code}); set HERALD_DATA_DIR`);
  }
}

function listenError(
  error: unknown,
  config: Pick<Config, 'host' | 'port'>,
  portVariable = 'HERALD_PORT',
  hostVariable = 'HERALD_HOST',
): Error {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${urlHost(config.host)}:${config.port}`;
  if (code === 'EADDRINUSE')
    return new StartupError(`port ${config.port} is already in use on ${config.host}; set ${portVariable}`);
  if (code === 'EACCES') return new StartupError(`no permission to listen on ${where}; set ${portVariable}`);
  if (code === 'EADDRNOTAVAIL')
    return new StartupError(`cannot listen on ${where}: no such address; set ${hostVariable}`);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return new StartupError(`cannot listen on ${where}: the name does not resolve; set ${hostVariable}`);
  return error instanceof Error ? error : new Error(String(error));
}

/** A database that cannot be reached or migrated stops start-up with one line, not a stack. */
function databaseError(error: unknown, config: Config): unknown {
  if (error instanceof ConfigError || error instanceof StartupError || !(error instanceof Error))
    return error;
  const where =
    config.database.kind === 'postgres' ? 'HERALD_DATABASE_URL' : 'HERALD_DATA_DIR or HERALD_DATABASE_URL';
  // A driver may quote the URL it was given: never its password.
  const message = error.message.replace(/(\/\/[^:/@\s]+):[^@/\s]*@/g, '$1:***@');
  return new StartupError(`cannot open the ${config.database.kind} database: ${message}; check ${where}`, {
    cause: error,
  });
}

export interface StartOptions {
  /**
   * Role `all`: run delivery in a supervised child process started this way (the herald command
   * this process runs), off the API's event loop. Without it, role `all` delivers in this process.
   */
  readonly workerProcess?: WorkerProcessSpawn;
  /**
   * This process is role `all`'s delivery child: the worker and the bounce intake, started and
   * woken by its parent over IPC, and stopping when the parent goes.
   */
  readonly childOfAll?: boolean;
  /**
   * PostgreSQL: the token of this process's notices of queued work (a new one unless given). Role
   * all's child is given its parent's: the parent wakes it over IPC, and ignoring the parent's
   * notices spares it a second, empty claim for each.
   */
  readonly noticeToken?: string;
}

/**
 * Starts a role: `api` serves HTTP (API and dashboard), `worker` delivers, `bounces` reads
 * reports, `all` does the three, delivery in a child process when the CLI starts it (or in this
 * one). The worker is woken by each accepted batch, so a send is picked up at once.
 */
export async function startServer(
  config: Config,
  role: Role,
  logger: Logger,
  plugins: readonly HttpPlugin[] = [],
  options: StartOptions = {},
): Promise<RunningServer> {
  checkDataDir(config.dataDir);
  const servesApi = role === 'all' || role === 'api';
  const delivers = role === 'worker' || (role === 'all' && options.workerProcess === undefined);
  const readsBounces =
    role === 'bounces' ||
    ((options.childOfAll === true || (role === 'all' && options.workerProcess === undefined)) &&
      (config.bounces.port !== null || config.bounces.imap !== null));
  const noticeToken = options.noticeToken ?? newNoticeToken();
  const services = await openServices(config, logger, {
    longRunning: true,
    servesApi,
    delivers,
    noticeToken,
  }).catch((error: unknown) => {
    throw databaseError(error, config);
  });
  let app: FastifyInstance | null = null;
  let worker: Worker | null = null;
  let child: WorkerProcess | null = null;
  let janitor: Janitor | null = null;
  let readers: BounceReaders | null = null;
  let url: string | null = null;
  let bouncePort: number | null = null;
  try {
    if (readsBounces) {
      readers = await createBounceReaders(services);
      bouncePort = await readers.start().catch((error: unknown) => {
        throw listenError(
          error,
          { ...config, host: config.bounces.host, port: config.bounces.port ?? 0 },
          'HERALD_BOUNCE_SMTP_PORT',
          'HERALD_BOUNCE_SMTP_HOST',
        );
      });
    }
    if (servesApi) {
      app = await buildApp({
        ...services,
        clientLimits: {
          ...DEFAULT_CLIENT_LIMITS,
          maxConnectionsPerClient: config.httpMaxConnectionsPerClient,
        },
        metricsRoute: {
          metrics: services.metrics,
          production: config.production,
          token: config.metricsToken,
        },
        plugins: plugins.map((plugin) => (instance: FastifyInstance) => plugin(instance, services)),
      });
      janitor = createJanitor(services);
      janitor.start();
      await app.listen({ port: config.port, host: config.host }).catch((error: unknown) => {
        throw listenError(error, config);
      });
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.port;
      url = `http://${urlHost(config.host)}:${port}`;
    }
    // Delivery starts once the ports are taken: a start that fails has claimed no mail.
    if (delivers) {
      worker = createWorker(services);
      worker.start();
    }
    if (role === 'all' && options.workerProcess !== undefined) {
      const spawn = options.workerProcess;
      const started = (child = new WorkerProcess(
        { ...spawn, args: [...spawn.args, '--notice-token', noticeToken] },
        {
          stopTimeoutMs: config.delivery.stopTimeoutMs,
          logger,
        },
      ));
      // Told before the child starts: work queued once it has made its first claim is not missed.
      services.accept.onAccepted(() => started.wake('mail'));
      services.webhooks.onQueued(() => started.wake('webhooks'));
      services.metrics.delivery = () => started.metrics();
      await started.start();
      bouncePort = started.bouncePort;
    }
  } catch (error) {
    await readers?.close();
    await child?.stop();
    await worker?.stop();
    await app?.close();
    await closeServices(services);
    throw error;
  }
  const mailTransport = await describeTransport(services);
  const bounceLine =
    bouncePort === null ? '' : `; bounce reports on smtp://${urlHost(config.bounces.host)}:${bouncePort}`;
  const { imap } = config.bounces;
  const imapLine =
    imap !== null && (readsBounces || child !== null) ? `; bounce reports from ${describeImap(imap)}` : '';
  const childLine = child === null ? '' : `; delivery in process ${child.pid}`;
  logger.info(
    { role, url, bouncePort, database: config.database.kind, mailTransport, workerPid: child?.pid },
    `Herald ${options.childOfAll ? 'delivery (role all)' : role} started${url ? ` on ${url}` : ''}; ` +
      `database ${config.database.kind}; mail transport: ${mailTransport}${bounceLine}${imapLine}${childLine}`,
  );

  let stopping: Promise<void> | null = null;
  const stop = () => {
    // Order matters: stop taking requests (in-flight ones finish and commit), then stop the
    // worker (SMTP transactions in flight finish, unstarted claims are released), then flush
    // the logs and close the database.
    stopping ??= (async () => {
      janitor?.stop();
      await readers?.close();
      await app?.close();
      await Promise.all([child?.stop(), worker?.stop()]);
      await closeServices(services);
      logger.info({ role }, 'Herald stopped');
    })();
    return stopping;
  };
  if (options.childOfAll) listenToParent(worker, bouncePort, services.metrics, stop, logger);
  return { services, app, worker, url, bouncePort, stop };
}

/**
 * Role `all`'s delivery child: tells the parent it runs, takes its wakes, and stops (finishing
 * what is in flight) when the parent is gone, whether it stopped or was killed.
 */
function listenToParent(
  worker: Worker | null,
  bouncePort: number | null,
  metrics: Metrics,
  stop: () => Promise<void>,
  logger: Logger,
): void {
  if (process.send === undefined) return;
  process.on('message', (message: WakeMessage | MetricsRequest) => {
    if (message?.type === 'metrics') {
      // A scrape never fails delivery: what cannot be read is answered as nothing, the parent's
      // metrics alone.
      void metrics.deliveryMetrics().then(
        (list) => {
          const reply: MetricsReply = { type: 'metrics', id: message.id, metrics: list };
          process.send?.(reply, undefined, undefined, () => {});
        },
        (err: unknown) => logger.warn({ err }, 'reading the delivery metrics failed'),
      );
      return;
    }
    if (message?.type !== 'wake') return;
    if (message.queue === 'mail') worker?.wake();
    else worker?.wakeWebhooks();
  });
  const parentGone = () => {
    logger.warn('the api process is gone; stopping delivery');
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  // The parent may have gone while this process started (stopped or killed during its start).
  if (!process.connected) return parentGone();
  process.once('disconnect', parentGone);
  const ready: ReadyMessage = { type: 'ready', bouncePort };
  // A channel that closes meanwhile is the disconnect above, not an error to crash on.
  process.send(ready, undefined, undefined, () => {});
}
