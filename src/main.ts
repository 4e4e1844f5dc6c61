import type { FastifyInstance } from 'fastify';
import type { Config, Role } from './config.js';
import { closeServices, createWorker, openServices, type Services } from './compose.js';
import { buildApp } from './http/app.js';
import { describeSmtpTarget } from './mail/smtp-target.js';
import { Janitor } from './services/janitor.js';
import type { DeliveryWorker } from './worker/worker.js';
import type { Logger } from 'pino';

export interface RunningServer {
  readonly services: Services;
  readonly app: FastifyInstance | null;
  readonly worker: DeliveryWorker | null;
  /** The bound address of the HTTP server, when the role serves HTTP. */
  readonly url: string | null;
  stop(): Promise<void>;
}

/** Extra routes (the dashboard) registered by the api role; set by the dashboard module. */
export type HttpPlugin = (app: FastifyInstance, services: Services) => Promise<void>;

function describeTransport(services: Services): string {
  if (services.globalSmtp !== null)
    return `SMTP ${describeSmtpTarget(services.globalSmtp)} (HERALD_SMTP_URL)`;
  if (services.config.production)
    return 'none: set HERALD_SMTP_URL or per-project SMTP settings (sends fail otherwise)';
  return 'capture (no SMTP configured: messages are rendered and stored, not sent)';
}

/**
 * Starts a role: `api` serves HTTP (API and dashboard), `worker` delivers, `all` does both in one
 * process. The in-process worker is woken by each accepted batch, so a send is picked up at once.
 */
export async function startServer(
  config: Config,
  role: Role,
  logger: Logger,
  plugins: readonly HttpPlugin[] = [],
): Promise<RunningServer> {
  const services = await openServices(config, logger, { longRunning: true });
  let app: FastifyInstance | null = null;
  let worker: DeliveryWorker | null = null;
  let janitor: Janitor | null = null;
  let url: string | null = null;
  try {
    if (role === 'all' || role === 'worker') {
      worker = createWorker(services);
      const w = worker;
      services.notifications.onAccepted(() => w.wake());
      worker.start();
    }
    if (role === 'all' || role === 'api') {
      app = await buildApp({
        ...services,
        plugins: plugins.map((plugin) => (instance: FastifyInstance) => plugin(instance, services)),
      });
      janitor = new Janitor(services.storage.db, services.apiLogs, config.apiLog, logger);
      janitor.start();
      await app.listen({ port: config.port, host: config.host });
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.port;
      url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    }
  } catch (error) {
    await worker?.stop();
    await app?.close();
    await closeServices(services);
    throw error;
  }
  logger.info(
    { role, url, database: config.database.kind, mailTransport: describeTransport(services) },
    `Herald ${role} started${url ? ` on ${url}` : ''}; database ${config.database.kind}; mail transport: ${describeTransport(services)}`,
  );

  let stopping: Promise<void> | null = null;
  return {
    services,
    app,
    worker,
    url,
    stop() {
      // Order matters: stop taking requests (in-flight ones finish and commit), then stop the
      // worker (SMTP transactions in flight finish, unstarted claims are released), then flush
      // the logs and close the database.
      stopping ??= (async () => {
        janitor?.stop();
        await app?.close();
        await worker?.stop();
        await closeServices(services);
        logger.info({ role }, 'Herald stopped');
      })();
      return stopping;
    },
  };
}
