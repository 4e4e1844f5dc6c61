import type { Command } from 'commander';
import { cliEnvironment, loadConfig, type Config } from '../config.js';
import { closeServices, openServices, type Services } from '../compose.js';
import { createLogger } from '../logger.js';
import { checkDatabaseExists } from './new-database.js';
import { createOutput, type Output } from './output.js';

export { checkDatabaseExists, createsDatabase } from './new-database.js';

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
  const undo = await checkDatabaseExists(config, command, out);
  // Command output goes to stdout; the service log to stderr (warnings and worse, unless
  // HERALD_LOG_LEVEL says otherwise).
  const logger = createLogger(config.logLevel ?? 'warn', process.stderr);
  let services: Services;
  try {
    services = await openServices(config, logger);
  } catch (error) {
    undo();
    throw error;
  }
  let failed = true;
  try {
    await body(services, out);
    failed = false;
  } finally {
    await closeServices(services);
    if (failed) undo();
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
