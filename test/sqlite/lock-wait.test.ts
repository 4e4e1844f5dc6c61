import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type BetterSqlite3Types from 'better-sqlite3';
import { SqliteDatabase as BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { Kysely, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { openSqlite } from '../../src/storage/sqlite/open.js';
import { LockWaitingSqliteDialect } from '../../src/storage/sqlite/lock-wait.js';

/**
 * Another process holding SQLite's write lock (here another connection in this process, which
 * makes a wait inside SQLite a deadlock until its timeout) must not stop Herald's event loop: a
 * writer waits on a timer and goes on once the lock is free.
 */
let dir: string;
let file: string;
let storage: Storage;
let other: BetterSqlite3Types.Database;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'herald-lock-'));
  file = join(dir, 'herald.db');
  storage = openSqlite(file);
  await storage.migrate();
  await sql`create table lock_test (v integer not null)`.execute(storage.db);
  other = new BetterSqlite3(file);
});

afterEach(async () => {
  if (other.inTransaction) other.exec('ROLLBACK');
  other.close();
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * How many times a 5 ms interval timer fires in `ms` while `counting()` holds. Timers fire only
 * when the event loop is free, so a statement that waited inside the call (SQLite's own busy
 * handler sleeps there) would leave none counted while it waits.
 */
async function timerTurns(ms: number, counting: () => boolean): Promise<number> {
  let turns = 0;
  const interval = setInterval(() => {
    if (counting()) turns++;
  }, 5);
  await new Promise((resolve) => setTimeout(resolve, ms));
  clearInterval(interval);
  return turns;
}

function insertValue(db: Kysely<Database>, v: number) {
  return sql`insert into lock_test (v) values (${v})`.execute(db);
}

async function values(db: Kysely<Database> = storage.db): Promise<number[]> {
  const { rows } = await sql<{ v: number }>`select v from lock_test order by rowid`.execute(db);
  return rows.map((row) => row.v);
}

describe('waiting for the write lock', () => {
  it('keeps the event loop running while a statement waits, and runs it once the lock is free', async () => {
    // The control: the turns this machine gives the timer with nothing waiting.
    const control = await timerTurns(200, () => true);
    other.exec('BEGIN IMMEDIATE');
    let waiting = true;
    const write = insertValue(storage.db, 7).finally(() => (waiting = false));
    try {
      const turns = await timerTurns(200, () => waiting);
      expect(waiting).toBe(true);
      console.info(`lock wait: ${turns} timer turns while the statement waited, ${control} with none`);
      expect(turns).toBeGreaterThanOrEqual(Math.max(3, Math.floor(control / 4)));
    } finally {
      // Whatever failed above, the statement ends before the database is closed.
      if (other.inTransaction) other.exec('COMMIT');
      await write.catch(() => undefined);
    }
    await write;
    expect(await values()).toEqual([7]);
  });

  it('begins a transaction only with the lock, so what it reads cannot be overtaken', async () => {
    other.exec('BEGIN IMMEDIATE');
    const transaction = storage.db.transaction().execute(async (tx) => {
      const before = await values(tx);
      await insertValue(tx, before.length + 1);
    });
    await nextTurn();
    // The other writer commits while the transaction waits: it must see this row when it runs.
    other.exec('INSERT INTO lock_test (v) VALUES (1)');
    other.exec('COMMIT');
    await transaction;
    expect(await values()).toEqual([1, 2]);
  });

  it('fails with SQLITE_BUSY when the lock stays taken past the timeout, and leaves no transaction open', async () => {
    const connection = new BetterSqlite3(file);
    connection.pragma('busy_timeout = 0');
    const db = new Kysely<Database>({
      dialect: new LockWaitingSqliteDialect(
        { database: connection },
        { timeoutMs: 100, inTransaction: () => connection.inTransaction },
      ),
    });
    try {
      other.exec('BEGIN IMMEDIATE');
      await expect(insertValue(db, 3)).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
      await expect(db.transaction().execute((tx) => insertValue(tx, 4))).rejects.toMatchObject({
        code: 'SQLITE_BUSY',
      });
      expect(connection.inTransaction).toBe(false);
      other.exec('ROLLBACK');
      await insertValue(db, 5);
      expect(await values()).toEqual([5]);
    } finally {
      await db.destroy();
    }
  });

  it('does not retry what no wait can fix', async () => {
    await expect(sql`insert into no_such_table values (1)`.execute(storage.db)).rejects.toThrow(
      /no such table/,
    );
  });

  it('reports the error that ended a transaction, not the ROLLBACK that found none left', async () => {
    // As a full disk does (SQLITE_FULL), a trigger's RAISE(ROLLBACK) ends the whole transaction.
    await sql`create trigger disk_full before insert on lock_test when new.v < 0
      begin select raise(rollback, 'database or disk is full'); end`.execute(storage.db);
    const write = storage.db.transaction().execute(async (tx) => {
      await insertValue(tx, 1);
      await insertValue(tx, -1);
    });
    await expect(write).rejects.toThrow('database or disk is full');
    expect(await values()).toEqual([]);
    await insertValue(storage.db, 2);
    expect(await values()).toEqual([2]);
  });
});
