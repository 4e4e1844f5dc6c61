/**
 * Figure 4, growth: accept throughput and status-lookup latency of Herald on SQLite with many
 * notifications already stored, against the same measurements on an empty database. The stored
 * rows are written straight into the SQLite file with one INSERT … SELECT over a recursive CTE
 * (seconds, not the hours a million POSTs would take). Lookups pick request_ids at random.
 */
import { keepAliveAgent, runPool } from '../lib/http-client.js';
import { SEND_PATH, authHeaders, sendNotification } from '../lib/herald-api.js';
import { progress } from '../lib/progress.js';
import type { Context, GrowthResult } from '../lib/results.js';
import { seedNotifications } from '../lib/sqlite-file.js';
import type { WrkResult, WrkTarget } from '../lib/wrk.js';
import { acceptTarget } from './accept.js';
import { databaseFile } from './drain.js';
import { measureWrk, prepareInstance, startRole, type Instance } from './measure.js';

/** Notifications created through the API on the empty database, for its lookups. */
const EMPTY_LOOKUP_IDS = 1_000;

async function measureBoth(
  ctx: Context,
  instance: Instance,
  label: string,
  lookup: (apiKey: string, port: number) => Promise<WrkTarget>,
): Promise<{ accept: WrkResult; lookupResult: WrkResult }> {
  const herald = await startRole(ctx, instance, 'api');
  try {
    const apiKey = instance.project.apiKey;
    // Lookups first: the accept run adds rows, and the empty case should stay (nearly) empty.
    const lookupResult = await measureWrk(
      ctx,
      `status lookup, ${label}`,
      herald.port,
      await lookup(apiKey, herald.port),
      herald,
    );
    const accept = await measureWrk(ctx, `accept, ${label}`, herald.port, acceptTarget(apiKey), herald);
    return { accept, lookupResult };
  } finally {
    await herald.stop();
  }
}

export async function runGrowth(ctx: Context, out: GrowthResult): Promise<void> {
  const empty = await prepareInstance(ctx, 'growth-empty');
  const emptyFigures = await measureBoth(ctx, empty, 'empty database', async (apiKey, port) => {
    const agent = keepAliveAgent(16);
    const ids: string[] = [];
    progress.start('growth: creating notifications to look up', () => `${ids.length}/${EMPTY_LOOKUP_IDS}`);
    await runPool(EMPTY_LOOKUP_IDS, 16, async (i) => {
      ids.push((await sendNotification(agent, port, apiKey, i)).request_id);
    });
    progress.stop();
    agent.destroy();
    return { method: 'GET', path: `${SEND_PATH}/`, pathSuffixes: ids, headers: authHeaders(apiKey, false) };
  });
  out.emptyAccept = emptyFigures.accept;
  out.emptyLookup = emptyFigures.lookupResult;

  const stored = await prepareInstance(ctx, 'growth-stored');
  progress.start(`growth: storing ${out.stored} notifications in SQLite`);
  const started = performance.now();
  seedNotifications(databaseFile(stored.dataDir), stored.project.id, out.stored);
  out.seedSeconds = (performance.now() - started) / 1000;
  progress.stop();
  progress.log(`  growth: stored ${out.stored} notifications in ${out.seedSeconds.toFixed(1)} s`);
  const storedFigures = await measureBoth(ctx, stored, `${out.stored} stored`, async (apiKey) => ({
    method: 'GET',
    path: `${SEND_PATH}/seed_`,
    pathRange: out.stored,
    headers: authHeaders(apiKey, false),
  }));
  out.storedAccept = storedFigures.accept;
  out.storedLookup = storedFigures.lookupResult;
}
