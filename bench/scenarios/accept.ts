/**
 * Figure 1, accept throughput: wrk POSTs valid sends to Herald's role `api` (the accept path on
 * its own: with role `all` the worker would take CPU from it on a small machine) and, in the same
 * run, to a bare node:http server that only parses the JSON and answers 202. SQLite always,
 * PostgreSQL when one is reachable; peak RSS of each Herald process is kept for figure 5.
 */
import { startBareServer } from '../lib/bare-server.js';
import { keepAliveAgent } from '../lib/http-client.js';
import { SEND_PATH, authHeaders, sendBody, sendNotification } from '../lib/herald-api.js';
import { createDatabase } from '../lib/postgres.js';
import { progress } from '../lib/progress.js';
import type { AcceptResult, Context } from '../lib/results.js';
import type { WrkResult, WrkTarget } from '../lib/wrk.js';
import { measureWrk, prepareInstance, startRole } from './measure.js';

export function acceptTarget(apiKey: string): WrkTarget {
  return { method: 'POST', path: SEND_PATH, body: sendBody(0), headers: authHeaders(apiKey, true) };
}

async function measureHerald(
  ctx: Context,
  label: string,
  name: string,
  databaseUrl?: string,
): Promise<{ result: WrkResult; rssMb: number }> {
  const instance = await prepareInstance(ctx, name, databaseUrl === undefined ? {} : { databaseUrl });
  const herald = await startRole(ctx, instance, 'api');
  let stopped = false;
  try {
    // One request first, so that a broken API fails with its own answer, not as a wrk error count.
    const agent = keepAliveAgent(1);
    await sendNotification(agent, herald.port, instance.project.apiKey);
    agent.destroy();
    const result = await measureWrk(ctx, label, herald.port, acceptTarget(instance.project.apiKey), herald);
    stopped = true;
    return { result, rssMb: await herald.stop() };
  } finally {
    if (!stopped) await herald.stop();
  }
}

export async function runAccept(
  ctx: Context,
  out: AcceptResult,
  problem: (message: string) => void,
): Promise<void> {
  progress.start('accept: starting the bare node:http server');
  const bare = await startBareServer(ctx.repoRoot);
  try {
    out.bare = await measureWrk(ctx, 'accept, bare node:http', bare.port, acceptTarget('hrl_bench'), bare);
  } finally {
    await bare.process.stop();
  }

  if (ctx.herald === undefined) return;
  try {
    const { result, rssMb } = await measureHerald(ctx, 'accept, Herald on SQLite', 'accept-sqlite');
    out.sqlite = result;
    out.rssMb.sqlite = rssMb;
  } catch (error) {
    problem(`SQLite: ${(error as Error).message}`);
  }

  if (!ctx.settings.postgres) {
    out.postgresSkipped = 'PostgreSQL: skipped (--no-pg)';
    return;
  }
  if ('skip' in ctx.postgres) {
    out.postgresSkipped = ctx.postgres.skip;
    return;
  }
  try {
    const database = await createDatabase(ctx.postgres.baseUrl);
    try {
      const { result, rssMb } = await measureHerald(
        ctx,
        'accept, Herald on PostgreSQL',
        'accept-postgres',
        database.url,
      );
      out.postgres = result;
      out.rssMb.postgres = rssMb;
    } finally {
      await database.drop();
    }
  } catch (error) {
    problem(`PostgreSQL: ${(error as Error).message}`);
  }
}
