import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { cliEnvironment, ConfigError, loadConfig, type Config } from '../config.js';
import { closeServices, openServices, type Services } from '../compose.js';
import { createLogger } from '../logger.js';
import { createOutput, type Output } from './output.js';

/**
 * Runs a command body against the same services the server uses, opened on the same database.
 * A running server sees the CLI's changes: its only cache, the project service's API keys, is
 * emptied when another connection commits (SQLite's data_version) or announces a change to
 * projects (PostgreSQL's `herald_projects` notice; `rotate-key` returns only once every server
 * has had time to hear it, so the old key is refused by then).
 */
export async function withServices(
  command: Command,
  body: (services: Services, out: Output) => Promise<void>,
): Promise<void> {
  const config = cliConfig(command);
  const out = outputOf(command);
  checkDatabaseExists(config, command, out);
  // Command output goes to stdout; the service log to stderr (warnings and worse, unless
  // HERALD_LOG_LEVEL says otherwise).
  const logger = createLogger(config.logLevel ?? 'warn', process.stderr);
  const services = await openServices(config, logger);
  try {
    await body(services, out);
  } finally {
    await closeServices(services);
  }
}

/**
 * A command's action over the services: commander calls it with the command's arguments, its
 * options and the command itself; `body` gets the open services, the output, then the arguments
 * and options (`async ({ projects }, out, ref: string, options: Options) => …`).
 */
export function servicesAction<A extends unknown[]>(
  body: (services: Services, out: Output, ...args: A) => Promise<void>,
): (...args: [...A, Command]) => Promise<void> {
  return (...args) => {
    const command = args[args.length - 1] as Command;
    const rest = args.slice(0, -1) as unknown as A;
    return withServices(command, (services, out) => body(services, out, ...rest));
  };
}

/** A subcommand about one project, which `--project` names (by name or id). */
export function projectSubcommand(parent: Command, name: string, description: string): Command {
  return parent
    .command(name)
    .description(description)
    .requiredOption('--project <project>', 'project name or id');
}

/** A subcommand about one named thing of a project: `--project`, then `--name` (`nameHelp`). */
export function namedSubcommand(
  parent: Command,
  name: string,
  description: string,
  nameHelp: string,
): Command {
  return projectSubcommand(parent, name, description).requiredOption('--name <name>', nameHelp);
}

/** Of the named options, those given on the command line: a change leaves the others as they are. */
export function given<O extends object, K extends keyof O>(options: O, ...names: K[]): Partial<Pick<O, K>> {
  return Object.fromEntries(
    names.filter((name) => options[name] !== undefined).map((name) => [name, options[name]]),
  ) as Partial<Pick<O, K>>;
}

/** Where a command prints: one JSON object with `--json`, else text. */
export function outputOf(command: Command): Output {
  return createOutput(Boolean(command.optsWithGlobals().json));
}

/** The configuration of a command, with its `--data-dir` applied. */
export function cliConfig(command: Command): Config {
  return loadConfig(cliEnvironment(command.optsWithGlobals<{ dataDir?: string }>().dataDir));
}

/** The commands that may make a new database: those that can succeed on an empty one. */
const CREATES_DATABASE = new WeakSet<Command>();

/** Marks a command that may be the first run on a new database (`herald project create`). */
export function createsDatabase(command: Command): Command {
  CREATES_DATABASE.add(command);
  return command;
}

/**
 * A command run from the wrong directory would make an empty database there and report "No
 * projects yet", or that a project does not exist. Where there is no SQLite database yet, a
 * command that could only read or change what is in one is refused, with nothing created; one
 * that makes the first of something (`createsDatabase`) goes on, and says on stderr where the new
 * database is and how to point at another.
 */
export function checkDatabaseExists(config: Config, command: Command, out: Output): void {
  if (config.database.kind !== 'sqlite' || existsSync(config.database.file)) return;
  const elsewhere = 'pass --data-dir DIR or set HERALD_DATA_DIR (or HERALD_DATABASE_URL)';
  if (!CREATES_DATABASE.has(command))
    throw new ConfigError(
      `no database at ${config.database.file}: run herald where the server keeps its data, or ${elsewhere}`,
    );
  out.warn(
    `no database at ${config.database.file}; creating a new one. ` +
      `If your server keeps its data elsewhere, ${elsewhere}.`,
  );
}
