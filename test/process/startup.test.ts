import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { runHerald } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/open.js';

/**
 * `herald serve` that cannot start says why in one line on stderr and exits 1 (product.md §7),
 * instead of exiting silently: a taken port, a data directory it cannot write, an invalid variable.
 */

let database: TestDatabase;
let blocker: Server;
let takenPort: number;

beforeAll(async () => {
  database = await freshDatabase();
  blocker = createServer().listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  takenPort = (blocker.address() as { port: number }).port;
});
afterAll(async () => {
  blocker?.close();
  await database?.drop();
});

function expectOneLine(result: { code: number | null; stderr: string }, text: RegExp): void {
  expect(result.code).toBe(1);
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(text);
}

describe('herald serve that cannot start', () => {
  it('names the taken port', async () => {
    const result = await runHerald(['serve'], testEnv(database, { HERALD_PORT: String(takenPort) }));
    expectOneLine(
      result,
      new RegExp(`^herald: port ${takenPort} is already in use on 127\\.0\\.0\\.1; set HERALD_PORT$`),
    );
  });

  it('names a data directory it cannot write', async () => {
    const file = path.join(database.dataDir, 'not-a-directory');
    writeFileSync(file, '');
    const dataDir = path.join(file, 'data');
    const result = await runHerald(['serve'], {
      ...testEnv(database),
      HERALD_DATA_DIR: dataDir,
      HERALD_PORT: '0',
    });
    expectOneLine(result, new RegExp(`^herald: the data directory ${dataDir} is not writable \\(ENOTDIR\\)`));
  });

  it('names a data directory under one that refuses new entries, rather than hanging', async () => {
    // /proc answers ENOENT to a new directory, where a recursive mkdir tried again without end.
    const result = await runHerald(['serve'], {
      ...testEnv(database),
      HERALD_DATA_DIR: '/proc/herald-data',
      HERALD_PORT: '0',
    });
    expectOneLine(result, /^herald: the data directory \/proc\/herald-data is not writable \(ENOENT\)/);
  });

  it.each<[string, Record<string, string>, RegExp]>([
    [
      'an address that is none',
      { HERALD_HOST: '999.1.1.1' },
      /^herald: HERALD_HOST must be an IP address or a host name to listen on, such as 127\.0\.0\.1 or 0\.0\.0\.0$/,
    ],
    [
      'a host name that does not resolve',
      { HERALD_HOST: 'no-such-host.invalid' },
      /^herald: cannot listen on no-such-host\.invalid:0: the name does not resolve; set HERALD_HOST$/,
    ],
    [
      'an unknown log level',
      { HERALD_LOG_LEVEL: 'loud' },
      /^herald: HERALD_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent$/,
    ],
  ])('names %s', async (_what, env, line) => {
    const result = await runHerald(['serve'], testEnv(database, { HERALD_PORT: '0', ...env }));
    expectOneLine(result, line);
  });

  it('names an invalid HERALD_SMTP_URL instead of hanging', async () => {
    const result = await runHerald(
      ['serve'],
      testEnv(database, { HERALD_SMTP_URL: 'smtp://relay.example:587?security=tls13', HERALD_PORT: '0' }),
    );
    expectOneLine(result, /^herald: HERALD_SMTP_URL: security must be one of auto, starttls, tls, none$/);
  });

  it('names an invalid HERALD_SMTP_FALLBACK_URL', async () => {
    const result = await runHerald(
      ['serve'],
      testEnv(database, {
        HERALD_SMTP_URL: 'smtp://relay.example:587',
        HERALD_SMTP_FALLBACK_URL: 'smtp://backup.example:587?security=tls13',
        HERALD_PORT: '0',
      }),
    );
    expectOneLine(
      result,
      /^herald: HERALD_SMTP_FALLBACK_URL: security must be one of auto, starttls, tls, none$/,
    );
  });

  it('refuses a HERALD_SMTP_FALLBACK_URL that is the relay of HERALD_SMTP_URL', async () => {
    const result = await runHerald(
      ['serve'],
      testEnv(database, {
        HERALD_SMTP_URL: 'smtp://relay.example:587',
        HERALD_SMTP_FALLBACK_URL: 'smtp://backup:pass@Relay.example:587?security=starttls',
        HERALD_PORT: '0',
      }),
    );
    expectOneLine(
      result,
      /^herald: HERALD_SMTP_FALLBACK_URL is the relay of HERALD_SMTP_URL \(relay\.example:587\): a fallback must be another host or port$/,
    );
  });

  it('says in one line when the database cannot be reached, without its password', async () => {
    const result = await runHerald(
      ['serve'],
      testEnv(database, {
        HERALD_DATABASE_URL: 'postgres://postgres:S3CRETPW@127.0.0.1:1/nowhere',
        HERALD_PORT: '0',
      }),
    );
    expectOneLine(
      result,
      /^herald: cannot open the postgres database: .*ECONNREFUSED.*; check HERALD_DATABASE_URL$/,
    );
    expect(result.stderr).not.toContain('S3CRETPW');
  });

  it('names an invalid variable', async () => {
    const result = await runHerald(['serve'], testEnv(database, { HERALD_DELIVERY_MAX_ATTEMPTS: 'many' }));
    expectOneLine(result, /^herald: HERALD_DELIVERY_MAX_ATTEMPTS must be a whole number, got "many"$/);
  });

  it('refuses a secret key that cannot read the stored secrets, before the check existed too', async () => {
    const env = testEnv(database);
    const created = await runHerald(['project', 'create', '--name', 'keyed'], env);
    expect(created.code, created.stderr).toBe(0);
    const hook = await runHerald(
      ['webhook', 'create', '--project', 'keyed', '--url', 'https://hooks.example.org/herald'],
      env,
    );
    expect(hook.code, hook.stderr).toBe(0);
    const wrong = { ...env, HERALD_SECRET_KEY: 'b'.repeat(64), HERALD_PORT: '0' };
    const refusal =
      /^herald: HERALD_SECRET_KEY is not the secret key this database's SMTP passwords and webhook secrets were stored with; start with the key it was made with/;
    expectOneLine(await runHerald(['serve'], wrong), refusal);
    expectOneLine(await runHerald(['project', 'list'], wrong), refusal);
    // A database from before the check: its stored webhook secret is the proof.
    const storage = openStorage(loadConfig(env).database);
    await storage.db.deleteFrom('settings').where('key', '=', 'secret_check').execute();
    await storage.close();
    expectOneLine(await runHerald(['project', 'list'], wrong), refusal);
    // The right key reads it, and writes the check again.
    const listed = await runHerald(['project', 'list'], env);
    expect(listed.code, listed.stderr).toBe(0);
    expectOneLine(await runHerald(['project', 'list'], wrong), refusal);
    // Seven processes one after another: on a busy machine each can take seconds to start.
  }, 120_000);
});
