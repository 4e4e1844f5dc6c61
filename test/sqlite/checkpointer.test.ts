import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import type { CheckpointReport } from '../../src/storage/sqlite/checkpointer.js';
import { openSqlite } from '../../src/storage/sqlite/open.js';
import { waitUntil } from '../helpers/wait.js';

const dir = mkdtempSync(path.join(tmpdir(), 'herald-wal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('SQLite background checkpoint', () => {
  it('copies committed WAL frames into the database from its own thread', async () => {
    const file = path.join(dir, 'herald.db');
    const reports: CheckpointReport[] = [];
    const storage = openSqlite(file, { backgroundCheckpoint: true, onCheckpoint: (r) => reports.push(r) });
    await storage.migrate();
    const before = statSync(file).size;
    for (let i = 0; i < 200; i++) {
      await sql`insert into settings (key, value) values (${`k${i}`}, ${'x'.repeat(2000)})`.execute(
        storage.db,
      );
    }
    // A report covering frames that are all checkpointed means the database file now holds them.
    const done = await waitUntil(
      () => reports.find((r) => (r.frames ?? 0) > 0 && r.frames === r.checkpointed),
      {
        what: 'a complete background checkpoint',
      },
    );
    expect(done.error).toBeUndefined();
    expect(statSync(file).size).toBeGreaterThan(before + 200 * 2000);
    await storage.close();
    expect(reports.some((r) => r.error !== undefined)).toBe(false);
  });

  it("is not started for short-lived commands, which keep SQLite's automatic checkpoint", async () => {
    const reports: CheckpointReport[] = [];
    const cli = openSqlite(path.join(dir, 'cli.db'), { onCheckpoint: (r) => reports.push(r) });
    const server = openSqlite(path.join(dir, 'server.db'), { backgroundCheckpoint: true });
    // The threshold is lowered back to SQLite's own only where no background thread checkpoints.
    const threshold = async (storage: typeof cli) =>
      (await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(storage.db)).rows[0]
        ?.wal_autocheckpoint;
    expect(await threshold(cli)).toBe(1000);
    expect(await threshold(server)).toBeGreaterThan(1000);
    await cli.migrate();
    await cli.close();
    await server.close();
    expect(reports).toEqual([]);
  });
});
