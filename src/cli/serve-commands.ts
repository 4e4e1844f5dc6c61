import { Command, Option } from 'commander';
import { loadConfig, type Role } from '../config.js';
import { createLogger } from '../logger.js';
import type { HttpPlugin, startServer } from '../main.js';
import { openStorage } from '../storage/open.js';

/**
 * The server and the dashboard are loaded only by `herald serve`, so the operator's commands
 * start without loading the HTTP stack.
 */
async function loadServer(): Promise<{
  startServer: typeof startServer;
  plugins: HttpPlugin[];
}> {
  const [{ startServer }, { dashboardPlugin }] = await Promise.all([
    import('../main.js'),
    import('../dashboard/plugin.js'),
  ]);
  return { startServer, plugins: [dashboardPlugin] };
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('run Herald: api (HTTP API and dashboard), worker (delivery), or all (both, the default)')
    .addOption(
      new Option('--role <role>', 'what this process does').choices(['all', 'api', 'worker']).default('all'),
    )
    .action(async (options: { role: Role }) => {
      const config = loadConfig();
      const logger = createLogger(config.logLevel ?? 'info');
      const { startServer, plugins } = await loadServer();
      const server = await startServer(config, options.role, logger, plugins);
      let signals = 0;
      const shutdown = (signal: string) => {
        signals++;
        if (signals > 1) {
          logger.warn({ signal }, 'second signal: exiting now');
          process.exit(1);
        }
        logger.info({ signal }, 'stopping: finishing requests and deliveries in flight');
        server.stop().then(
          () => process.exit(0),
          (err: unknown) => {
            logger.error({ err }, 'error while stopping');
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => shutdown('SIGTERM'));
      process.on('SIGINT', () => shutdown('SIGINT'));
    });
}

export function migrateCommand(): Command {
  return new Command('migrate')
    .description('create or upgrade the database schema (safe to run from several processes at once)')
    .action(async (_options: unknown, command: Command) => {
      const storage = openStorage(loadConfig().database);
      try {
        await storage.migrate();
      } finally {
        await storage.close();
      }
      const json = Boolean(command.optsWithGlobals().json);
      process.stdout.write(
        json
          ? JSON.stringify({ migrated: true, database: storage.kind }) + '\n'
          : `Schema is up to date (${storage.kind}).\n`,
      );
    });
}
