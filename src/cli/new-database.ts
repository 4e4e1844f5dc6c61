import { rmSync, rmdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError, type Config, type DatabaseConfig } from '../config.js';
import { secretKeyFile } from '../security/secret-key.js';
import { openStorage } from '../storage/open.js';
import type { Output } from './output.js';

/**
 * A command run from the wrong directory, or against a database nobody set up, would make an
 * empty database there and report "No projects yet", or that a project does not exist. Where
 * there is no database yet, a command that could only read or change what is in one is refused,
 * with nothing created; one that makes the first of something (`createsDatabase`) goes on, says
 * on stderr where the new database is, and takes it away again if it fails (a name refused, a
 * password too short), so that a failed first command leaves nothing behind either.
 */

/** The commands that may make a new database: those that can succeed on an empty one. */
const CREATES_DATABASE = new WeakSet<Command>();

/** Marks a command that may be the first run on a new database (`herald project create`). */
export function createsDatabase(command: Command): Command {
  CREATES_DATABASE.add(command);
  return command;
}

/** Takes away what a failed first command made; nothing to take away when the database was there. */
export type Undo = () => void;

/**
 * Refuses a command that needs a database where there is none (see above); for one that may make
 * it, warns, and returns how to take the new one away again.
 */
export async function checkDatabaseExists(config: Config, command: Command, out: Output): Promise<Undo> {
  if (config.database.kind === 'postgres') {
    if (!CREATES_DATABASE.has(command)) await refuseWithoutSchema(config.database);
    return () => {};
  }
  const file = config.database.file;
  if (present(file)) return () => {};
  const elsewhere = process.env.HERALD_DATABASE_URL
    ? 'check HERALD_DATABASE_URL'
    : 'pass --data-dir DIR or set HERALD_DATA_DIR (or HERALD_DATABASE_URL)';
  if (!CREATES_DATABASE.has(command))
    throw new ConfigError(
      `no database at ${file}: run herald where the server keeps its data, or ${elsewhere}`,
    );
  out.warn(
    `no database at ${file}; creating a new one. If your server keeps its data elsewhere, ${elsewhere}.`,
  );
  return undoOf(
    [file, `${file}-wal`, `${file}-shm`, `${file}-journal`, secretKeyFile(config.dataDir)],
    [path.dirname(file), config.dataDir],
  );
}

/** Whether `file` exists; a file that cannot be looked at is said as such, not taken for none. */
function present(file: string): boolean {
  try {
    statSync(file);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw new ConfigError(
      `cannot read ${file} (${code ?? 'error'}): run herald as the user the server runs as`,
    );
  }
}

/** Removes the files and then the (empty) directories of `files`/`dirs` that do not exist now. */
function undoOf(files: readonly string[], dirs: readonly string[]): Undo {
  const newFiles = files.filter((file) => !present(file));
  const newDirs = [...new Set(dirs)].filter((dir) => !present(dir));
  return () => {
    for (const file of newFiles) rmSync(file, { force: true });
    // Deepest first; a directory something else was put in meanwhile is left.
    for (const dir of newDirs.sort((a, b) => b.length - a.length))
      try {
        rmdirSync(dir);
      } catch {
        // Not empty, or gone: left as it is.
      }
  };
}

/** Refuses a command on a PostgreSQL database that Herald has not set up (`herald migrate`). */
async function refuseWithoutSchema(database: Extract<DatabaseConfig, { kind: 'postgres' }>): Promise<void> {
  const storage = openStorage(database);
  try {
    const tables = await storage.db.introspection.getTables();
    if (tables.some((table) => table.name === 'herald_migrations')) return;
  } finally {
    await storage.close();
  }
  throw new ConfigError(
    `the database at ${shownUrl(database.url)} has no Herald tables yet: run herald migrate ` +
      '(or start the server) first, or check HERALD_DATABASE_URL',
  );
}

/** A database URL without its password. */
function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}${parsed.port === '' ? '' : `:${parsed.port}`}${parsed.pathname}`;
  } catch {
    return 'HERALD_DATABASE_URL';
  }
}
