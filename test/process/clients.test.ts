import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { REPO_ROOT } from '../helpers/processes.js';
import { seedProject, testEnv } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The Node and Python examples of docs/clients.md, taken from the document as written and run as
 * real programs against a live Herald, so the published examples cannot rot.
 */

const exec = promisify(execFile);
const doc = readFileSync(path.join(REPO_ROOT, 'docs/clients.md'), 'utf8');

function example(language: string): string {
  const match = new RegExp('```' + language + '\\n([\\s\\S]*?)\\n```').exec(doc);
  if (match === null) throw new Error(`docs/clients.md has no ${language} example`);
  return match[1]!;
}

let database: TestDatabase;
let server: RunningServer;
let apiKey: string;
const dir = mkdtempSync(path.join(tmpdir(), 'herald-clients-'));

beforeAll(async () => {
  database = await freshDatabase();
  const config = loadConfig(testEnv(database, { HERALD_PORT: '0', HERALD_DELIVERY_POLL_MS: '20' }));
  server = await startServer(config, 'all', createLogger('silent'));
  ({ apiKey } = await seedProject(server.services));
});

afterAll(async () => {
  await server?.stop();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

async function run(command: string, source: string, file: string): Promise<Record<string, unknown>> {
  const script = path.join(dir, file);
  writeFileSync(script, source);
  const { stdout } = await exec(command, [script], {
    env: { PATH: process.env.PATH, HERALD_URL: server.url!, HERALD_API_KEY: apiKey },
    timeout: 20_000,
  });
  return JSON.parse(stdout.trim()) as Record<string, unknown>;
}

async function delivered(requestId: string): Promise<void> {
  await waitUntil(
    async () => {
      const row = await server.services.storage.db
        .selectFrom('notifications')
        .select(['state', 'recipient'])
        .where('request_id', '=', requestId)
        .executeTakeFirst();
      return row?.state === 'sent' ? row : undefined;
    },
    { what: `${requestId} to be sent` },
  );
}

describe('docs/clients.md examples', () => {
  it('Node (fetch) sends and reads the status', async () => {
    const status = await run(process.execPath, example('js'), 'example.mjs');
    expect(status).toMatchObject({ template: 'user_created', to: 'jane@example.org' });
    expect(['queued', 'sent']).toContain(status.status);
    await delivered(String(status.request_id));
  });

  it('Python (standard library) sends and reads the status', async () => {
    const status = await run('python3', example('python'), 'example.py');
    expect(status).toMatchObject({ template: 'user_created', to: 'jane@example.org' });
    expect(['queued', 'sent']).toContain(status.status);
    await delivered(String(status.request_id));
  });
});
