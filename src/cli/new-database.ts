import { lstatSync, readlinkSync, rmSync, rmdirSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError, type Config, type DatabaseConfig } from '../config.js';
import { secretKeyFile } from '../security/secret-key.js';
import { CHECK_KEY } from '../services/secret-check.js';
import { openStorage } from '../storage/open.js';
import { SqliteDatabase } from '../storage/sqlite/driver.js';
import type { Output } from './output.js';

/**
 * A command run from the wrong directory, or against a database nobody set up, would make an
 * empty database there and report "No projects yet", or that a project does not exist. Where
 * there is no database yet, a command that could only read or change what is in one is refused,
 * with nothing created; one that makes the first of something (`createsDatabase`) goes on, says
 * on stderr where the new database is, and takes it away again if it fails (a name refused, a
 * password too short), so that a failed first command leaves nothing behind either. Only while
 * nothing else uses it: a server or another command that opened the new database meanwhile, or
 * wrote to it, keeps it.
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
export async function checkDatabaseExists(
  config: Config,
  command: Command,
  out: Output,
  options: { readonly setsUpEmpty?: boolean } = {},
): Promise<Undo> {
  if (config.database.kind === 'postgres') {
    if (!CREATES_DATABASE.has(command)) await refuseWithoutSchema(config.database);
    return () => {};
  }
  const file = config.database.file;
  if (databaseFileAt(file, { emptyIsNew: options.setsUpEmpty === true }) !== null) return () => {};
  const elsewhere = elsewhereAdvice();
  if (present(file))
    throw new ConfigError(`${file} is a link to ${readlinkSync(file)}, which does not exist: ${elsewhere}`);
  if (!CREATES_DATABASE.has(command))
    throw new ConfigError(
      `no database at ${file}: run herald where the server keeps its data, or ${elsewhere}`,
    );
  out.warn(
    `no database at ${file}; creating a new one. If your server keeps its data elsewhere, ${elsewhere}.`,
  );
  return undoOf(
    file,
    [`${file}-wal`, `${file}-shm`, `${file}-journal`, secretKeyFile(config.dataDir)],
    [path.dirname(file), config.dataDir],
    out,
  );
}

function elsewhereAdvice(): string {
  return process.env.HERALD_DATABASE_URL
    ? 'check HERALD_DATABASE_URL'
    : 'pass --data-dir DIR or set HERALD_DATA_DIR (or HERALD_DATABASE_URL)';
}

/**
 * Refuses a SQLite database path that holds no Herald database to open: a directory, or an empty
 * (0-byte) file, which SQLite would take for a new database, and a restore whose copy failed
 * would start again from nothing, with a new secret key. Nothing there at all is left to the
 * caller. `herald migrate` sets an empty file up as a new database; every other command, the
 * server too, refuses it.
 */
export function refuseEmptyDatabase(config: Config): void {
  if (config.database.kind === 'sqlite') databaseFileAt(config.database.file, { emptyIsNew: false });
}

/** What is at the database path `file`, or null for nothing; what is no database to open is refused (above). */
function databaseFileAt(file: string, options: { readonly emptyIsNew: boolean }): Stats | null {
  const found = statOf(file);
  if (found === null) return null;
  if (!found.isFile()) throw new ConfigError(`${file} is not a database file: ${elsewhereAdvice()}`);
  // A new database in WAL mode may hold everything in its -wal file yet, its own still empty.
  if (!options.emptyIsNew && found.size === 0 && (statOf(`${file}-wal`)?.size ?? 0) === 0)
    throw new ConfigError(
      `${file} is empty (0 bytes) and holds no Herald data: if it is a restored copy, the copy ` +
        'failed; run herald migrate to set it up as a new database',
    );
  return found;
}

/** What is at `file`, or null for nothing; one that cannot be looked at is said as such, not taken for none. */
function statOf(file: string): Stats | null {
  try {
    return statSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    if (code === 'ELOOP')
      throw new ConfigError(`${file} is a link that leads back to itself: ${elsewhereAdvice()}`);
    throw new ConfigError(
      `cannot read ${file} (${code ?? 'error'}): run herald as the user the server runs as`,
    );
  }
}

/** Whether anything is at `path`: a link counts, even one that leads nowhere. */
function present(at: string): boolean {
  try {
    lstatSync(at);
    return true;
  } catch {
    return false;
  }
}

/** Tables every new database has rows in: Herald's own bookkeeping, no one's data. */
const BOOKKEEPING = new Set(['herald_migrations', 'herald_migrations_lock', 'sqlite_sequence']);

/** What counts as written to a table: any row, but in `settings` only one other than the key check. */
function rowQuery(table: string): string {
  const name = `"${table.replaceAll('"', '""')}"`;
  return table === 'settings'
    ? `SELECT 1 FROM settings WHERE key <> '${CHECK_KEY}' LIMIT 1`
    : `SELECT 1 FROM ${name} LIMIT 1`;
}

/**
 * Why the new database at `file` must stay, or null: another connection has it open (its -wal or
 * -shm file outlives the last connection only while one is open), or something wrote to it.
 */
function keptFor(file: string): string | null {
  if (present(`${file}-wal`) || present(`${file}-shm`)) return 'another process has it open';
  const db = new SqliteDatabase(file, { fileMustExist: true });
  try {
    const written = db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .some(({ name }) => !BOOKKEEPING.has(name) && db.prepare(rowQuery(name)).get() !== undefined);
    return written ? 'something was written to it meanwhile' : null;
  } finally {
    db.close();
  }
}

/** `dir` and those of its parents that do not exist, the directories making it would make. */
function missingFrom(dir: string): string[] {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !present(at); at = path.dirname(at)) missing.push(at);
  return missing;
}

/**
 * Takes away the new database `file`, the `files` and then the (empty) directories of `dirs` that
 * do not exist now, unless something else uses it by then. Never fails: the command's own error
 * is the one to see, and what could not be taken away is said on stderr.
 */
function undoOf(file: string, files: readonly string[], dirs: readonly string[], out: Output): Undo {
  const newFiles = files.filter((at) => !present(at));
  const newDirs = [...new Set(dirs.flatMap(missingFrom))];
  return () => {
    try {
      if (present(file)) {
        const kept = keptFor(file);
        if (kept !== null) {
          out.warn(`kept the new database at ${file}: ${kept}`);
          return;
        }
        rmSync(file, { force: true });
      }
      for (const at of newFiles) rmSync(at, { force: true });
      // Deepest first; a directory something else was put in meanwhile is left.
      for (const dir of newDirs.sort((a, b) => b.length - a.length))
        try {
          rmdirSync(dir);
        } catch {
          // Not empty, or gone: left as it is.
        }
    } catch (error) {
      out.warn(`could not take away the new database at ${file}: ${(error as Error).message}`);
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
