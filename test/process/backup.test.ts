import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runHerald } from '../helpers/processes.js';
import { TEST_SECRET } from '../helpers/services.js';

/**
 * `herald backup --to FILE`, `--data-dir` on every command and the new-database warning, as an
 * operator runs them: real processes, real SQLite files, and a restore that finds the data.
 */

const root = mkdtempSync(path.join(tmpdir(), 'herald-backup-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const env = { HERALD_SECRET_KEY: TEST_SECRET };

describe('herald backup and --data-dir', () => {
  it('refuses to read where there is no database, creates one only to make the first of something, and says so', async () => {
    const dataDir = path.join(root, 'warn');
    const file = path.join(dataDir, 'herald.db');
    const where = 'run herald where the server keeps its data, or pass --data-dir DIR';
    // A command that reads or changes what a database holds makes none: it names where it looked.
    for (const args of [
      ['project', 'list'],
      ['template', 'list', '--project', 'shop'],
      ['notification', 'show', 'req_x'],
    ]) {
      const refused = await runHerald([...args, '--data-dir', dataDir], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`no database at ${file}: ${where}`);
      expect(existsSync(dataDir)).toBe(false);
    }
    const json = await runHerald(['project', 'list', '--json', '--data-dir', dataDir], env);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toEqual({
      error: expect.stringMatching(/^no database at .*herald\.db: run /),
    });
    expect(json.stdout).toBe('');

    // The first project makes it, with a warning; --data-dir points every command at it.
    const first = await runHerald(['project', 'create', '--name', 'shop', '--data-dir', dataDir], env);
    expect(first.code).toBe(0);
    expect(first.stderr).toContain(`no database at ${file}; creating a new one`);
    expect(first.stderr).toContain('--data-dir');
    const second = await runHerald(['--data-dir', dataDir, 'project', 'list', '--json'], env);
    expect(second.code).toBe(0);
    expect(second.stderr).not.toContain('no database');
    expect(JSON.parse(second.stdout)).toMatchObject({ projects: [{ name: 'shop' }] });
    // Under --json the warning is JSON too, as errors are.
    const made = await runHerald(['migrate', '--json', '--data-dir', path.join(root, 'json')], env);
    expect(made.code).toBe(0);
    expect(JSON.parse(made.stderr)).toEqual({
      warning: expect.stringMatching(/^no database at .*herald\.db; creating a new one\. /),
    });
  });

  it('takes away the new database again when the first command fails', async () => {
    const dataDir = path.join(root, 'failed-first');
    const refusedName = await runHerald(['project', 'create', '--name', '', '--data-dir', dataDir], env);
    expect(refusedName.code).toBe(1);
    expect(refusedName.stderr).toContain('Project name must be');
    expect(existsSync(dataDir)).toBe(false);
    // Without HERALD_SECRET_KEY the first run also generates data-dir/secret.key: taken away too.
    const shortPassword = await runHerald(
      ['admin', 'create', '--email', 'ops@example.com', '--password-stdin', '--data-dir', dataDir],
      {},
      60_000,
      'short\n',
    );
    expect(shortPassword.code).toBe(1);
    expect(shortPassword.stderr).toContain('Password must be 10');
    expect(existsSync(dataDir)).toBe(false);
    // A directory that was there before is kept; only what the command made goes.
    mkdirSync(dataDir);
    writeFileSync(path.join(dataDir, 'notes.txt'), 'kept');
    expect((await runHerald(['project', 'create', '--name', '', '--data-dir', dataDir], env)).code).toBe(1);
    expect(readdirSync(dataDir)).toEqual(['notes.txt']);
  });

  it('says what is wrong with a database path that holds a directory or an empty file', async () => {
    const dataDir = path.join(root, 'odd');
    const file = path.join(dataDir, 'herald.db');
    mkdirSync(file, { recursive: true });
    const directory = await runHerald(['project', 'list', '--data-dir', dataDir], env);
    expect(directory.code).toBe(1);
    expect(directory.stderr).toBe(
      `herald: ${file} is not a database file: pass --data-dir DIR or set HERALD_DATA_DIR (or HERALD_DATABASE_URL)\n`,
    );
    // migrate, which sets up an empty file, says the same of a directory.
    const migrated = await runHerald(['migrate', '--data-dir', dataDir], env);
    expect(migrated.code).toBe(1);
    expect(migrated.stderr).toBe(directory.stderr);
    rmSync(file, { recursive: true });
    // A restore whose copy failed leaves an empty file: not taken for an empty Herald.
    writeFileSync(file, '');
    const empty = await runHerald(['project', 'list', '--data-dir', dataDir], env);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain(`${file} is empty (0 bytes) and holds no Herald data`);
    // Nor by a command that could make the first of something, nor by the server, which would
    // start again from nothing with a new secret key.
    for (const args of [
      ['project', 'create', '--name', 'shop'],
      ['serve', '--role', 'api'],
    ]) {
      const refused = await runHerald([...args, '--data-dir', dataDir], { ...env, HERALD_PORT: '0' });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${file} is empty (0 bytes) and holds no Herald data`);
    }
    expect(statSync(file).size).toBe(0);
    // migrate sets it up as a new database, as it says.
    expect((await runHerald(['migrate', '--data-dir', dataDir], env)).code).toBe(0);
    expect((await runHerald(['project', 'list', '--data-dir', dataDir], env)).code).toBe(0);

    // A link that leads nowhere is named, not taken for a place to make a new database.
    const linked = path.join(root, 'linked');
    mkdirSync(linked);
    symlinkSync(path.join(root, 'nowhere', 'herald.db'), path.join(linked, 'herald.db'));
    const dangling = await runHerald(['project', 'create', '--name', 'shop', '--data-dir', linked], env);
    expect(dangling.code).toBe(1);
    expect(dangling.stderr).toContain(
      `${path.join(linked, 'herald.db')} is a link to ${path.join(root, 'nowhere', 'herald.db')}, which does not exist`,
    );
    expect(readdirSync(linked)).toEqual(['herald.db']);
  });

  it('copies a live SQLite database that restores with its data', async () => {
    const dataDir = path.join(root, 'live');
    const created = await runHerald(
      ['project', 'create', '--name', 'shop', '--data-dir', dataDir, '--json'],
      env,
    );
    expect(created.code).toBe(0);
    const file = path.join(root, 'copy.db');
    const backup = await runHerald(['backup', '--to', file, '--data-dir', dataDir, '--json'], env);
    expect(backup.code, backup.stderr).toBe(0);
    expect(JSON.parse(backup.stdout)).toMatchObject({
      backup: file,
      secret_key: 'the value of HERALD_SECRET_KEY',
    });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // A second backup never overwrites a file.
    expect((await runHerald(['backup', '--to', file, '--data-dir', dataDir], env)).code).toBe(1);

    const restored = path.join(root, 'restored');
    await runHerald(['migrate', '--data-dir', restored], env);
    copyFileSync(file, path.join(restored, 'herald.db'));
    const list = await runHerald(['project', 'list', '--data-dir', restored, '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain('"shop"');
  });

  it('says which secret key to keep with the copy, and the copy opens only with it', async () => {
    const dataDir = path.join(root, 'generated');
    // No HERALD_SECRET_KEY: the key is generated into the data directory.
    const created = await runHerald(['project', 'create', '--name', 'hooks', '--data-dir', dataDir], {});
    expect(created.code, created.stderr).toBe(0);
    const hook = await runHerald(
      [
        'webhook',
        'create',
        '--project',
        'hooks',
        '--url',
        'https://hooks.example.org/h',
        '--data-dir',
        dataDir,
      ],
      {},
    );
    expect(hook.code, hook.stderr).toBe(0);
    const file = path.join(root, 'generated.db');
    const backup = await runHerald(['backup', '--to', file, '--data-dir', dataDir], {});
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain(`Keep the file ${path.join(dataDir, 'secret.key')} with it`);

    // Restored into a new directory without its key: refused, in one line, and no key is made
    // there (a new one could never open the copy's secrets).
    const restored = path.join(root, 'restored-elsewhere');
    mkdirSync(restored, { recursive: true });
    copyFileSync(file, path.join(restored, 'herald.db'));
    const refused = await runHerald(['project', 'list', '--data-dir', restored], {});
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain(
      `No secret key: this database was set up with a secret key that is neither in HERALD_SECRET_KEY nor in ${restored}/secret.key, and its SMTP passwords and webhook secrets open only with that key`,
    );
    expect(existsSync(path.join(restored, 'secret.key'))).toBe(false);
    // Another key in its place: refused, naming the file.
    writeFileSync(path.join(restored, 'secret.key'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const wrong = await runHerald(['project', 'list', '--data-dir', restored], {});
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`the key in ${restored}/secret.key is not the secret key`);
    // With the key it was made with, it opens.
    copyFileSync(path.join(dataDir, 'secret.key'), path.join(restored, 'secret.key'));
    const opened = await runHerald(['project', 'list', '--data-dir', restored, '--json'], {});
    expect(opened.code, opened.stderr).toBe(0);
    expect(opened.stdout).toContain('"hooks"');
  });

  it("run without the server's environment, writes no key and names none to keep, but says so", async () => {
    const dataDir = path.join(root, 'configured');
    // The server's database, made with HERALD_SECRET_KEY, holding a sealed webhook secret.
    await runHerald(['project', 'create', '--name', 'env', '--data-dir', dataDir], env);
    const hook = await runHerald(
      [
        'webhook',
        'create',
        '--project',
        'env',
        '--url',
        'https://hooks.example.org/h',
        '--data-dir',
        dataDir,
      ],
      env,
    );
    expect(hook.code, hook.stderr).toBe(0);

    const list = await runHerald(['project', 'list', '--data-dir', dataDir], {});
    expect(list.code).toBe(1);
    expect(list.stderr).toContain('No secret key');
    expect(existsSync(path.join(dataDir, 'secret.key'))).toBe(false);

    const file = path.join(root, 'configured.db');
    const backup = await runHerald(['backup', '--to', file, '--data-dir', dataDir, '--json'], {});
    expect(backup.code, backup.stderr).toBe(0);
    expect(JSON.parse(backup.stdout)).toMatchObject({ backup: file, secret_key: null });
    expect(JSON.parse(backup.stderr).warning).toContain(
      `neither HERALD_SECRET_KEY nor ${path.join(dataDir, 'secret.key')} is here: keep the server's key with the copy`,
    );
    expect(existsSync(path.join(dataDir, 'secret.key'))).toBe(false);

    const mistyped = await runHerald(
      ['backup', '--to', path.join(root, 'mistyped.db'), '--data-dir', dataDir],
      {
        HERALD_SECRET_KEY: 'c'.repeat(64),
      },
    );
    expect(mistyped.code, mistyped.stderr).toBe(0);
    expect(mistyped.stdout).not.toContain('Keep ');
    expect(mistyped.stderr).toContain('and HERALD_SECRET_KEY does not open them');
  });

  it("answers an operator's mistakes in one line, without a stack trace", async () => {
    const dataDir = path.join(root, 'live');
    const noFolder = await runHerald(
      ['backup', '--to', path.join(root, 'no-such-folder', 'x.db'), '--data-dir', dataDir],
      env,
    );
    expect(noFolder.code).toBe(1);
    expect(noFolder.stderr.trim().split('\n')).toEqual([
      `herald: Cannot write ${path.join(root, 'no-such-folder', 'x.db')}: ${path.join(root, 'no-such-folder')} does not exist`,
    ]);
    const empty = path.join(root, 'empty');
    mkdirSync(empty, { recursive: true });
    const noDatabase = await runHerald(['backup', '--to', path.join(root, 'e.db'), '--data-dir', empty], env);
    expect(noDatabase.code).toBe(1);
    expect(noDatabase.stderr.trim().split('\n')).toEqual([
      `herald: No database at ${path.join(empty, 'herald.db')}: nothing to back up (is --data-dir the server's?)`,
    ]);
  });

  it('says to use pg_dump on PostgreSQL, before connecting anywhere', async () => {
    const result = await runHerald(['backup', '--to', path.join(root, 'pg.db')], {
      ...env,
      HERALD_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('pg_dump');
  });
});
