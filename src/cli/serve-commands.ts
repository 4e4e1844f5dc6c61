import { existsSync } from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { ConfigError, StartupError, type Config } from '../config.js';
import { backupSqlite } from '../storage/sqlite/backup.js';
import type { Role } from '../config.js';
import { checkDatabaseExists, cliConfig, createsDatabase, outputOf } from './context.js';
import { refuseEmptyDatabase } from './new-database.js';
import { createLogger } from '../logger.js';
import type { HttpPlugin } from '../http/plugin.js';
import type { startServer } from '../server.js';
import type { FailedMessage, StopMessage } from '../worker-process.js';
import { openStorage } from '../storage/open.js';
import type { Storage } from '../storage/storage.js';
import { secretKeyFile } from '../security/secret-key.js';
import { secretKeyStanding } from '../services/secret-check.js';

/**
 * The server and the dashboard are loaded only by `herald serve`, so the operator's commands
 * start without loading the HTTP stack.
 */
async function loadServer(): Promise<{
  startServer: typeof startServer;
  plugins: HttpPlugin[];
}> {
  const [{ startServer }, { dashboardPlugin }] = await Promise.all([
    import('../server.js'),
    import('../dashboard/plugin.js'),
  ]);
  return { startServer, plugins: [dashboardPlugin] };
}

interface ServeOptions {
  readonly role: Role;
  readonly asWorkerOfAll?: boolean;
  readonly noticeToken?: string;
}

/** A token of notices of queued work, as `newNoticeToken` makes them. */
function noticeToken(value: string): string {
  if (!/^[0-9a-f]{16}$/.test(value)) throw new InvalidArgumentError('expected 16 hexadecimal digits');
  return value;
}

export function serveCommand(): Command {
  return (
    new Command('serve')
      .description(
        'run Herald: api (HTTP API and dashboard), worker (mail and webhook delivery), bounces (inbound SMTP for bounce reports), or all (api and worker, plus bounces when HERALD_BOUNCE_SMTP_PORT is set; the default)',
      )
      .addOption(
        new Option('--role <role>', 'what this process does')
          .choices(['all', 'api', 'worker', 'bounces'])
          .default('all'),
      )
      // Role all starts its delivery as `serve --as-worker-of-all`, a child process it supervises.
      .addOption(new Option('--as-worker-of-all').hideHelp())
      // … with its parent's token for notices of queued work, which it then takes for its own.
      .addOption(new Option('--notice-token <token>').hideHelp().argParser(noticeToken))
      .action(async (options: ServeOptions, command: Command) => {
        const config = cliConfig(command);
        refuseEmptyDatabase(config);
        // Readable lines for a person at a terminal, JSON lines for anything that collects them.
        const logger = createLogger(config.logLevel ?? 'info', undefined, {
          pretty: process.stdout.isTTY === true,
        });
        const child = options.asWorkerOfAll === true;
        // A signal during the start (the API may answer before role all's delivery is up) is
        // kept, and the stop follows as soon as everything that started can be stopped in order.
        // A second one (a start that hangs) exits at once. Role all's child leaves Ctrl-C's SIGINT
        // to its parent, as it does once running.
        let early: string | undefined;
        let onSignal: (signal: string) => void = (signal) => {
          if (child && signal === 'SIGINT') return;
          if (early === undefined) {
            early = signal;
            logger.info({ signal }, 'stopping once started');
            return;
          }
          logger.warn({ signal }, 'second signal while starting: exiting now');
          process.exit(1);
        };
        for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => onSignal(signal));
        const { startServer, plugins } = await loadServer();
        const starting = startServer(config, child ? 'worker' : options.role, logger, plugins, {
          childOfAll: child,
          noticeToken: options.noticeToken,
          workerProcess:
            options.role === 'all' && !child
              ? {
                  script: process.argv[1]!,
                  execArgv: process.execArgv,
                  args: ['serve', '--data-dir', config.dataDir],
                }
              : undefined,
        });
        // Role all's child tells its parent why it could not start; the parent says it, once.
        const server = child ? await starting.catch(toParent) : await starting;
        let stopping = false;
        const stop = (reason: string) => {
          stopping = true;
          logger.info({ reason }, 'stopping: finishing requests and deliveries in flight');
          server.stop().then(
            () => process.exit(0),
            (err: unknown) => {
              logger.error({ err }, 'error while stopping');
              process.exit(1);
            },
          );
        };
        if (child) {
          // Role all's child stops once, whoever asks: its parent (a stop message), or a SIGTERM
          // sent to the whole process group, which also reaches the parent and so arrives twice.
          // Ctrl-C reaches the group too; the parent's stop message follows it. The parent kills
          // a child that outlives the stop timeout.
          const once = (reason: string) => {
            if (!stopping) stop(reason);
          };
          onSignal = (signal) => {
            if (signal === 'SIGTERM') once(signal);
          };
          process.on('message', (message: StopMessage) => {
            if (message?.type === 'stop') once('parent');
          });
          if (early !== undefined) once(early);
          return;
        }
        onSignal = (signal: string) => {
          if (!stopping) return stop(signal);
          logger.warn({ signal }, 'second signal: exiting now');
          process.exit(1);
        };
        if (early !== undefined) onSignal(early);
      })
  );
}

export function migrateCommand(): Command {
  return createsDatabase(new Command('migrate'))
    .description('create or upgrade the database schema (safe to run from several processes at once)')
    .action(async (_options: unknown, command: Command) => {
      const config = cliConfig(command);
      const undo = await checkDatabaseExists(config, command, outputOf(command), { setsUpEmpty: true });
      let storage: Storage | undefined;
      let applied: readonly string[];
      try {
        storage = openStorage(config.database);
        applied = await storage.migrate();
      } catch (error) {
        await storage?.close();
        undo();
        throw error;
      }
      await storage.close();
      outputOf(command).print(
        { migrated: true, database: storage.kind, applied },
        applied.length === 0
          ? `Schema is up to date (${storage.kind}).`
          : `Upgraded the schema with ${applied.length} migration${applied.length === 1 ? '' : 's'} (${applied.join(', ')}); it is up to date (${storage.kind}).`,
      );
    });
}

export function backupCommand(): Command {
  return new Command('backup')
    .description('write a consistent copy of the SQLite database while Herald runs (PostgreSQL: use pg_dump)')
    .requiredOption(
      '--to <file>',
      'where to write the copy (mode 0600; it holds key hashes and encrypted secrets)',
    )
    .action(async (options: { to: string }, command: Command) => {
      const config = cliConfig(command);
      if (config.database.kind !== 'sqlite') {
        throw new ConfigError(
          'herald backup copies the embedded SQLite database; for PostgreSQL use pg_dump (see docs/operations.md)',
        );
      }
      const from = config.database.file;
      if (!existsSync(from))
        throw new ConfigError(`No database at ${from}: nothing to back up (is --data-dir the server's?)`);
      const to = path.resolve(options.to);
      if (existsSync(to)) throw new ConfigError(`${to} already exists; choose a new file`);
      const folder = path.dirname(to);
      if (!existsSync(folder)) throw new ConfigError(`Cannot write ${to}: ${folder} does not exist`);
      let pages: number;
      try {
        ({ pages } = await backupSqlite(from, to));
      } catch (error) {
        // The file system's or SQLite's refusal (permissions, a full disk, a file that is not a
        // database) is the operator's to fix, not a bug.
        const code = (error as { code?: unknown }).code;
        if (typeof code !== 'string') throw error;
        throw new ConfigError(`Backup of ${from} to ${to} failed: ${(error as Error).message} (${code})`);
      }
      const out = outputOf(command);
      const key = await backupKeyAdvice(config);
      out.print(
        { backup: to, from, pages, secret_key: key.name },
        `Backed up ${from} to ${to} (${pages} pages).` +
          (key.name === null ? '' : `\n${keepKeyLine(key.name)}`),
      );
      if (key.warning !== null) out.warn(key.warning);
    });
}

function keepKeyLine(name: string): string {
  return `Keep ${name} with it: a restored database starts only with the secret key it was made with.`;
}

/**
 * Which secret key a backup must be kept with, checked against the database: a copy is only as
 * good as the key that opens its SMTP passwords and webhook secrets. A key that is missing here or
 * does not open them (a command run without the server's environment) is said, not named as the
 * one to keep. The copy is made by then: a check that cannot run is a warning too, not a failure.
 */
async function backupKeyAdvice(config: Config): Promise<{ name: string | null; warning: string | null }> {
  const name =
    config.secretKey !== null
      ? 'the value of HERALD_SECRET_KEY'
      : `the file ${secretKeyFile(config.dataDir)}`;
  const keepServers =
    "the copy's SMTP passwords and webhook secrets open only with the key the server runs with";
  let standing: Awaited<ReturnType<typeof secretKeyStanding>>;
  try {
    const storage = openStorage(config.database);
    try {
      standing = await secretKeyStanding(storage.db, {
        configured: config.secretKey,
        dataDir: config.dataDir,
      });
    } finally {
      await storage.close();
    }
  } catch (error) {
    return {
      name,
      warning: `the secret key could not be checked (${(error as Error).message}); ${keepServers}`,
    };
  }
  if (standing === 'opens') return { name, warning: null };
  const why =
    standing === 'missing'
      ? `neither HERALD_SECRET_KEY nor ${secretKeyFile(config.dataDir)} is here`
      : config.secretKey !== null
        ? 'HERALD_SECRET_KEY does not open them'
        : `the key in ${secretKeyFile(config.dataDir)} does not open them`;
  return {
    name: null,
    warning:
      `${keepServers}, and ${why}: keep the server's key with the copy ` +
      "(run herald backup with the server's environment to have it checked)",
  };
}

/**
 * In role all's child: hands a start-up failure to the parent, which reports it as its own, and
 * exits once it is sent. An unexpected error's stack is printed here, where it happened.
 */
function toParent(error: unknown): Promise<never> {
  if (process.send === undefined) throw error;
  const known = error instanceof ConfigError || error instanceof StartupError;
  if (!known) process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  const message: FailedMessage = {
    type: 'failed',
    message: error instanceof Error ? error.message : String(error),
  };
  process.send(message, () => process.exit(1));
  return new Promise<never>(() => {});
}
