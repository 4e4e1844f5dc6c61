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

/** The `nth` example in this language (0: the plain send, 1: the send with a file). */
function example(language: string, nth = 0): string {
  const matches = [...doc.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)\\n```', 'g'))];
  const match = matches[nth];
  if (match === undefined) throw new Error(`docs/clients.md has no example ${nth} in ${language}`);
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
    cwd: dir,
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

  /** The invoice.pdf the file examples read from their working directory. */
  const invoice = Buffer.concat([
    Buffer.from('%PDF-1.7\n'),
    Buffer.alloc(40_000, 7),
    Buffer.from('\n%%EOF\n'),
  ]);

  it.each([
    ['Node', process.execPath, 'js', 'files.mjs'],
    ['Python', 'python3', 'python', 'files.py'],
  ])(
    '%s sends a file with a Reply-To and metadata, and reads them back',
    async (_name, command, language, file) => {
      writeFileSync(path.join(dir, 'invoice.pdf'), invoice);
      const status = await run(command, example(language, 1), file);
      expect(status).toMatchObject({
        to: 'jane@example.org',
        reply_to: 'billing@shop.example',
        metadata: { order_id: 'o-77' },
        attachments: [{ filename: 'invoice.pdf', content_type: 'application/pdf', size: invoice.length }],
      });
      await delivered(String(status.request_id));
    },
  );

  it('has a file example in every language', () => {
    for (const language of ['js', 'python', 'php', 'go', 'ruby'])
      expect(example(language, 1), language).toMatch(/invoice\.pdf/);
  });
});
