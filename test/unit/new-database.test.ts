import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { checkDatabaseExists, createsDatabase } from '../../src/cli/new-database.js';
import type { Output } from '../../src/cli/output.js';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/open.js';
import { SqliteDatabase } from '../../src/storage/sqlite/driver.js';

/**
 * What a failed first command takes away again: the new database it made, unless something else
 * uses it by then, and never anything that was there before.
 */

const root = mkdtempSync(path.join(tmpdir(), 'herald-new-db-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function warnings(): Output & { said: string[] } {
  const said: string[] = [];
  return { said, print() {}, printList() {}, warn: (text) => said.push(text) };
}

/** A command that may make the database, its check made, and the new database then made. */
async function newDatabase(name: string) {
  const dataDir = path.join(root, name);
  const config = loadConfig({ HERALD_DATA_DIR: dataDir });
  const out = warnings();
  const undo = await checkDatabaseExists(config, createsDatabase(new Command('project')), out);
  const storage = openStorage(config.database);
  await storage.migrate();
  await storage.close();
  const file = path.join(dataDir, 'herald.db');
  return { dataDir, file, out, undo };
}

describe('a failed first command', () => {
  it('takes away the new database and the directory it made', async () => {
    const { dataDir, out, undo } = await newDatabase('alone');
    expect(existsSync(dataDir)).toBe(true);
    undo();
    expect(existsSync(dataDir)).toBe(false);
    expect(out.said).toEqual([expect.stringContaining('creating a new one')]);
  });

  it('takes away the parent directories it made for it, and no other', async () => {
    const { undo } = await newDatabase('made/on/the/way');
    expect(existsSync(path.join(root, 'made/on/the/way/herald.db'))).toBe(true);
    undo();
    expect(existsSync(path.join(root, 'made'))).toBe(false);
    expect(existsSync(root)).toBe(true);
  });

  it('keeps it while another process has it open', async () => {
    const { file, out, undo } = await newDatabase('open');
    const other = new SqliteDatabase(file);
    try {
      other.pragma('journal_mode = WAL');
      other.prepare('SELECT 1 FROM herald_migrations').get();
      undo();
      expect(existsSync(file)).toBe(true);
      expect(out.said.at(-1)).toBe(`kept the new database at ${file}: another process has it open`);
    } finally {
      other.close();
    }
  });

  it('keeps it when something was written to it meanwhile', async () => {
    const { file, out, undo } = await newDatabase('written');
    const other = new SqliteDatabase(file);
    other
      .prepare(
        "INSERT INTO admins (email, password_hash, created_at, updated_at) VALUES ('ops@example.com', 'x', 0, 0)",
      )
      .run();
    other.close();
    undo();
    expect(existsSync(file)).toBe(true);
    expect(out.said.at(-1)).toBe(`kept the new database at ${file}: something was written to it meanwhile`);
  });

  it('never removes a link that was there before, even one that leads nowhere', async () => {
    const dataDir = path.join(root, 'linked');
    mkdirSync(dataDir);
    symlinkSync(path.join(root, 'nowhere.key'), path.join(dataDir, 'secret.key'));
    const config = loadConfig({ HERALD_DATA_DIR: dataDir, HERALD_SECRET_KEY: 'k'.repeat(64) });
    const undo = await checkDatabaseExists(config, createsDatabase(new Command('project')), warnings());
    const storage = openStorage(config.database);
    await storage.migrate();
    await storage.close();
    undo();
    expect(readdirSync(dataDir)).toEqual(['secret.key']);
  });
});
