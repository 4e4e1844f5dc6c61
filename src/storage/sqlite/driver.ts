import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

/**
 * The SQLite driver for the running Node. better-sqlite3 13 is a Node-API addon shipped prebuilt,
 * and needs Node 22 or later (on Node 20 it crashes when loaded). better-sqlite3 12, the last
 * release that runs on Node 20, is built against V8 at install, and on Node 24.19 and later its
 * statements abort the process when they are collected outside a JavaScript context (an idle
 * garbage collection, a worker thread's end). Both are installed, 12 as the optional dependency
 * `better-sqlite3-node20`: Node 20 loads 12, every later Node loads 13. The pair goes when
 * Node 20 support does. Worker threads that open the database load the same file (`path`).
 */
const require = createRequire(import.meta.url);

export const SQLITE_DRIVER =
  Number(process.versions.node.split('.')[0]) >= 22 ? 'better-sqlite3' : 'better-sqlite3-node20';

function load(): { Database: typeof BetterSqlite3; path: string } {
  try {
    return { Database: require(SQLITE_DRIVER) as typeof BetterSqlite3, path: require.resolve(SQLITE_DRIVER) };
  } catch (error) {
    throw new Error(
      `SQLite's driver (${SQLITE_DRIVER}) does not load on Node ${process.version}: ` +
        `${error instanceof Error ? error.message : String(error)}. ` +
        'Run `npm ci` (or `npm rebuild`) with the Node that runs Herald.',
      { cause: error },
    );
  }
}

const driver = load();

/** better-sqlite3's `Database`, from the release that runs on this Node. */
export const SqliteDatabase = driver.Database;
/** The driver's entry file, for a worker thread to `require`. */
export const sqliteDriverPath = driver.path;
