import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { closeServices, openServices } from '../../src/compose.js';
import { createJanitor } from '../../src/roles.js';
import { loadConfig } from '../../src/config.js';
import { ApiLogService } from '../../src/services/api-log.js';
import { Janitor } from '../../src/services/janitor.js';
import { openSqlite } from '../../src/storage/sqlite/open.js';
import { addNotification, addProject } from '../integration/storage-fixture.js';

/**
 * What a copy of the SQLite files gives away: the files are readable by their owner only, and
 * content erased by the retention rule is gone from the bytes on disk, not only from queries.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'herald-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const mode = (file: string) => statSync(file).mode & 0o777;

describe('SQLite files', () => {
  it('are created readable and writable by their owner only (0600), WAL and SHM included', async () => {
    const previous = process.umask(0o022);
    try {
      const file = path.join(dir, 'fresh', 'herald.db');
      const storage = openSqlite(file);
      await storage.migrate();
      for (const f of [file, `${file}-wal`, `${file}-shm`]) expect(mode(f), f).toBe(0o600);
      await storage.close();
    } finally {
      process.umask(previous);
    }
  });

  it('tightens a database file left world-readable', async () => {
    const file = path.join(dir, 'old.db');
    writeFileSync(file, '');
    chmodSync(file, 0o644);
    const storage = openSqlite(file);
    await storage.migrate();
    expect(mode(file)).toBe(0o600);
    await storage.close();
  });

  it('holds no trace of erased content in the database bytes', async () => {
    const file = path.join(dir, 'erase.db');
    const storage = openSqlite(file);
    await storage.migrate();
    const secret = 'hunter2-very-secret-value';
    const projectId = await addProject(storage.db);
    for (let i = 0; i < 20; i++) {
      await addNotification(storage.db, projectId, {
        state: 'sent',
        updated_at: 1_000,
        data: JSON.stringify({ password: `${secret}-${i}` }),
        text_body: `Your password is ${secret}-${i}`,
      });
    }
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(storage.db);
    expect(readFileSync(file).includes(secret)).toBe(true);

    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      storage.db,
      new ApiLogService(storage.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 1000 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );
    expect((await janitor.runOnce(Date.now())).contents).toBe(20);
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(storage.db);
    const bytes = Buffer.concat([readFileSync(file), readFileSync(`${file}-wal`)]);
    expect(bytes.includes(secret)).toBe(false);
    await storage.close();
  });

  it('holds no trace of erased content in the WAL once housekeeping has erased it', async () => {
    const dataDir = path.join(dir, 'wal');
    const file = path.join(dataDir, 'herald.db');
    const config = loadConfig({
      HERALD_DATA_DIR: dataDir,
      HERALD_SECRET_KEY: 'a'.repeat(64),
      HERALD_CONTENT_RETENTION_DAYS: '0',
    });
    // As a server opens it: the WAL checkpointed from the background thread, never truncated by it.
    const services = await openServices(config, pino({ level: 'silent' }), { longRunning: true });
    try {
      const secret = 'correct-horse-battery-staple';
      const projectId = await addProject(services.storage.db);
      for (let i = 0; i < 40; i++) {
        await addNotification(services.storage.db, projectId, {
          state: 'sent',
          updated_at: 1_000,
          data: JSON.stringify({ password: `${secret}-${i}` }),
          text_body: `Your password is ${secret}-${i}`,
        });
      }
      expect(readFileSync(`${file}-wal`).includes(secret)).toBe(true);
      expect((await createJanitor(services).runOnce(Date.now())).contents).toBe(40);
      // Read at once: nothing may wait for a later checkpoint to overwrite the old frames.
      for (const f of [file, `${file}-wal`]) expect(readFileSync(f).includes(secret), f).toBe(false);
    } finally {
      await closeServices(services);
    }
  });
});
