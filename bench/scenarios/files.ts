/**
 * Figure 8, accept with a file: wrk POSTs sends that each carry one 256 KiB file (a typical
 * invoice PDF) to Herald's role `api`, and, in the same run, to the bare node:http server of
 * figure 1 (read the body, JSON.parse it, answer 202). Herald decodes the file off the event
 * loop, writes it before the accept (a chunk per transaction, one project's files one at a time)
 * and links it in the group commit; figure 1 measures the same path for sends without a file.
 * SQLite always, PostgreSQL when one is reachable.
 */
import { randomBytes } from 'node:crypto';
import { startBareServer } from '../lib/bare-server.js';
import { SEND_PATH, authHeaders, sendItem } from '../lib/herald-api.js';
import { createDatabase } from '../lib/postgres.js';
import { progress } from '../lib/progress.js';
import type { Context, FilesResult } from '../lib/results.js';
import type { WrkTarget } from '../lib/wrk.js';
import { measureWrk, prepareInstance, startRole } from './measure.js';

export const FILE_BYTES = 256 * 1024;

/** A send with one file of FILE_BYTES random bytes (incompressible, as a PDF mostly is). */
function filesTarget(apiKey: string): WrkTarget {
  const body = JSON.stringify({
    ...sendItem(0),
    attachments: [{ filename: 'invoice.pdf', content: randomBytes(FILE_BYTES).toString('base64') }],
  });
  return { method: 'POST', path: SEND_PATH, body, headers: authHeaders(apiKey, true) };
}

async function measureHerald(ctx: Context, label: string, name: string, databaseUrl?: string) {
  const instance = await prepareInstance(ctx, name, databaseUrl === undefined ? {} : { databaseUrl });
  const herald = await startRole(ctx, instance, 'api');
  try {
    return await measureWrk(ctx, label, herald.port, filesTarget(instance.project.apiKey), herald);
  } finally {
    await herald.stop();
  }
}

export async function runFiles(
  ctx: Context,
  out: FilesResult,
  problem: (message: string) => void,
): Promise<void> {
  progress.start('files: starting the bare node:http server');
  const bare = await startBareServer(ctx.repoRoot);
  try {
    out.bare = await measureWrk(
      ctx,
      'accept with a file, bare node:http',
      bare.port,
      filesTarget('hrl_bench'),
      bare,
    );
  } finally {
    await bare.process.stop();
  }
  if (ctx.herald === undefined) return;
  try {
    out.sqlite = await measureHerald(ctx, 'accept with a file, Herald on SQLite', 'files-sqlite');
  } catch (error) {
    problem(`SQLite: ${(error as Error).message}`);
  }
  if (!ctx.settings.postgres || 'skip' in ctx.postgres) {
    out.postgresSkipped = 'skip' in ctx.postgres ? ctx.postgres.skip : 'PostgreSQL: skipped (--no-pg)';
    return;
  }
  try {
    const database = await createDatabase(ctx.postgres.baseUrl);
    try {
      out.postgres = await measureHerald(
        ctx,
        'accept with a file, Herald on PostgreSQL',
        'files-postgres',
        database.url,
      );
    } finally {
      await database.drop();
    }
  } catch (error) {
    problem(`PostgreSQL: ${(error as Error).message}`);
  }
}
