import { Command, CommanderError } from 'commander';
import { ConfigError, StartupError } from '../config.js';
import { HeraldError } from '../domain/errors.js';
import { VERSION } from '../version.js';
import { adminCommands } from './admin-commands.js';
import { notificationCommands, statsCommand } from './notification-commands.js';
import { projectCommands } from './project-commands.js';
import { backupCommand, migrateCommand, serveCommand } from './serve-commands.js';
import { smtpCommands } from './smtp-commands.js';
import { templateCommands } from './template-commands.js';
import { tokenCommands } from './token-commands.js';
import { layoutCommands } from './layout-commands.js';
import { suppressionCommands } from './suppression-commands.js';
import { webhookCommands } from './webhook-commands.js';
import { closestName } from '../domain/suggest.js';

/**
 * How a command reports a usage error (an unknown option, a missing value): as commander's line
 * with the help after it, or, under `--json`, as `{"error": …}` on stderr like every other error.
 */
function reportUsageErrors(command: Command, json: boolean): Command {
  if (!json) return command.showHelpAfterError();
  return command.configureOutput({
    // The help commander shows for a missing command is reported by run() instead.
    writeErr: () => {},
    outputError: (text) =>
      process.stderr.write(JSON.stringify({ error: text.replace(/^error: /, '').trim() }) + '\n'),
  });
}

/** `herald`: the server and the operator's commands, over the same services as the API. */
export function buildProgram(options: { json?: boolean } = {}): Command {
  const json = options.json ?? false;
  const program = new Command('herald')
    .description('Herald: self-hosted email notifications over any SMTP relay')
    .option('--json', 'print one JSON object on stdout')
    .option('--data-dir <dir>', 'data directory (overrides HERALD_DATA_DIR)')
    .version(json ? JSON.stringify({ version: VERSION }) : VERSION, '-V, --version', 'print the version')
    // Options of `herald` itself only before a command: `template rollback --version N` is the
    // command's own option, never a request for Herald's version.
    .enablePositionalOptions()
    .exitOverride();
  reportUsageErrors(program, json);
  for (const command of [
    serveCommand(),
    migrateCommand(),
    backupCommand(),
    projectCommands(),
    templateCommands(),
    layoutCommands(),
    smtpCommands(),
    webhookCommands(),
    suppressionCommands(),
    notificationCommands(),
    statsCommand(),
    adminCommands(),
    tokenCommands(),
  ]) {
    program.addCommand(command);
  }
  // Every subcommand accepts --json after its own options too, and reports usage errors by
  // throwing (exit code 2) instead of exiting the process from inside commander.
  for (const command of program.commands) {
    for (const sub of [command, ...command.commands]) {
      sub
        .option('--json', 'print one JSON object on stdout')
        .option('--data-dir <dir>', 'data directory (overrides HERALD_DATA_DIR)')
        .exitOverride();
      reportUsageErrors(sub, json);
    }
  }
  return program;
}

/**
 * The command a command line reached (`herald template`): its words matched against the
 * program's commands, options and their values skipped.
 */
function reachedCommand(
  program: Command,
  args: readonly string[],
): { command: Command; path: string; rest: readonly string[] } {
  const path = ['herald'];
  let command = program;
  let end = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--data-dir') i++;
    if (arg.startsWith('-')) continue;
    const sub = command.commands.find((candidate) => candidate.name() === arg);
    if (sub === undefined) break;
    command = sub;
    path.push(arg);
    end = i + 1;
  }
  return { command, path: path.join(' '), rest: args.slice(end) };
}

/**
 * A long option `command` does not know, where commander would report a required option as
 * missing instead: it checks those first, so `--subjct s` read as a missing `--subject` and the
 * typo was never named. Null when no required option is missing (commander names the unknown one).
 */
function unknownBesideMissing(command: Command, args: readonly string[]): string | null {
  const known = new Map(command.options.flatMap((option) => (option.long ? [[option.long, option]] : [])));
  const given = new Set<string>();
  let unknown: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') break;
    if (arg === '--help' || arg === '-h') return null;
    if (!arg.startsWith('--')) continue;
    const flag = arg.split('=')[0]!;
    const option = known.get(flag);
    if (option === undefined) unknown ??= flag;
    else {
      given.add(flag);
      // Its value is the next word, whatever it looks like (`--text --draft--`).
      if (option.required && !arg.includes('=')) i++;
    }
  }
  const missing = command.options.some(
    (option) => option.mandatory && option.long !== undefined && !given.has(option.long),
  );
  return missing ? unknown : null;
}

export async function run(argv: readonly string[]): Promise<void> {
  const json = argv.includes('--json');
  const program = buildProgram({ json });
  try {
    const reached = reachedCommand(program, argv.slice(2));
    const unknown = unknownBesideMissing(reached.command, reached.rest);
    if (unknown !== null) {
      const near = closestName(
        unknown,
        reached.command.options.flatMap((option) => option.long ?? []),
      );
      reached.command.error(
        // In commander's own words for an unknown option, so both paths read alike.
        `error: unknown option '${unknown}'${near === null ? '' : `\n(Did you mean ${near}?)`}`,
        {
          code: 'commander.unknownOption',
        },
      );
    }
    await program.parseAsync([...argv]);
  } catch (error) {
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode === 0 ? 0 : 2;
      // A command that needs one of its own was given none: commander's help, as JSON one line.
      // (`herald help` asked for it: exit 0, nothing to report.)
      if (json && error.code === 'commander.help' && error.exitCode !== 0) {
        const called = reachedCommand(program, argv.slice(2)).path;
        process.stderr.write(
          JSON.stringify({ error: `${called} needs a command: see ${called} --help` }) + '\n',
        );
      }
      return;
    }
    const known =
      error instanceof HeraldError || error instanceof ConfigError || error instanceof StartupError;
    const message = error instanceof Error ? error.message : String(error);
    // What to change, where the fixed message cannot say it (as the API answers it, `hint`).
    const hint = error instanceof HeraldError ? error.hint : undefined;
    if (json) process.stderr.write(JSON.stringify({ error: message, ...(hint && { hint }) }) + '\n');
    else process.stderr.write(`herald: ${message}\n${hint === undefined ? '' : `${hint}\n`}`);
    // Anything but a domain or configuration error is a bug: its stack belongs in the report.
    if (!known && error instanceof Error && error.stack) process.stderr.write(error.stack + '\n');
    process.exitCode = 1;
  }
}
