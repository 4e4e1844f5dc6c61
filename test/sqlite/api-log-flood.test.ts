import http from 'node:http';
import { SqliteDatabase as BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { httpRequest, ProcessGroup, type HeraldProcess } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A real `herald serve --role api` under a flood of unauthenticated requests while another
 * connection holds SQLite's write lock: more API log entries pile up than one INSERT may carry
 * (SQLite allows 32,766 parameters, nine per entry). The process must keep answering /healthz,
 * obey SIGTERM, and write the API log again once the lock is gone.
 */

/** Past 32,766 / 9 = 3,640 entries, one INSERT of the whole buffer would fail. */
const PILED_UP_DURING_LOCK = 6_000;
const LANES = 32;

let database: TestDatabase;
let services: Services;
let env: Record<string, string>;
const group = new ProcessGroup();

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database);
  services = await openServices(loadConfig(env), createLogger('silent'));
});

afterAll(async () => {
  await group.killAll();
  await closeServices(services);
  await database.drop();
});

/** Unauthenticated sends on keep-alive connections until `stop()`; counts the 401s. */
function flood(url: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: LANES });
  let running = true;
  let answered = 0;
  let failure: unknown = null;
  const lane = async () => {
    while (running) {
      try {
        const reply = await httpRequest(`${url}/api/v1/notifications`, {
          body: { template: 'welcome', to: 'x@example.org' },
          agent,
          timeoutMs: 120_000,
        });
        if (reply.status !== 401) throw new Error(`expected 401, got ${reply.status}`);
        answered++;
      } catch (error) {
        failure ??= error;
        return;
      }
    }
  };
  const lanes = Promise.all(Array.from({ length: LANES }, lane));
  return {
    get answered() {
      return answered;
    },
    async stop() {
      running = false;
      await lanes;
      agent.destroy();
      if (failure !== null) throw failure;
    },
  };
}

async function healthy(url: string): Promise<number> {
  return (await httpRequest(`${url}/healthz`, { timeoutMs: 120_000 })).status;
}

/** Times GET /healthz once every 50 ms, into the phase named at the time (for the figures printed). */
function probe(url: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const phases = new Map<string, number[]>();
  let phase = 'idle';
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const label = phase;
      await httpRequest(`${url}/healthz`, { agent, timeoutMs: 120_000 }).catch(() => undefined);
      const list = phases.get(label) ?? [];
      list.push(performance.now() - started);
      phases.set(label, list);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1]!;
  return {
    set phase(name: string) {
      phase = name;
    },
    async stop(): Promise<string> {
      running = false;
      await loop;
      agent.destroy();
      const idle = p99(phases.get('idle') ?? [1]);
      return [...phases]
        .map(
          ([name, values]) =>
            `${name}: p99 ${p99(values).toFixed(1)} ms (${(p99(values) / idle).toFixed(1)}x idle)`,
        )
        .join('; ');
    },
  };
}

describe('API log under a flood while the database is locked', () => {
  let proc: HeraldProcess;
  let url: string;

  it('keeps answering, writes the log again after the lock, and stops on SIGTERM', async () => {
    const { project, apiKey } = await services.projects.create({ name: 'flooded' });
    ({ proc, url } = await group.http('api', 'api', { ...env, HERALD_LOG_LEVEL: 'info' }));

    const healthz = probe(url);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    healthz.phase = 'flood';
    const attack = flood(url);
    await waitUntil(() => (attack.answered >= 500 ? true : undefined), { timeoutMs: 60_000 });

    // Another writer (a CLI command, a second role, an sqlite3 shell) holds the write lock.
    const locker = new BetterSqlite3(database.url);
    locker.exec('BEGIN IMMEDIATE');
    healthz.phase = 'flood while locked';
    const atLock = attack.answered;
    try {
      await waitUntil(() => (attack.answered - atLock >= PILED_UP_DURING_LOCK ? true : undefined), {
        timeoutMs: 60_000,
        what: () => `${PILED_UP_DURING_LOCK} requests answered during the lock (${attack.answered - atLock})`,
      });
    } finally {
      locker.exec('ROLLBACK');
      locker.close();
    }

    // The flood goes on after the lock is released; the process still answers everyone.
    healthz.phase = 'flood after the lock';
    const atRelease = attack.answered;
    await waitUntil(() => (attack.answered - atRelease >= 1_000 ? true : undefined), {
      timeoutMs: 60_000,
      what: () => `requests answered after the lock (${attack.answered - atRelease})`,
    });
    expect(await healthy(url)).toBe(200);
    await attack.stop();
    console.log(`/healthz under a flood of 401s and a held write lock: ${await healthz.stop()}`);

    // The log is written again: an authenticated request made now shows up in it.
    const logged = await httpRequest(`${url}/api/v1/notifications/not-a-request-id`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(logged.status).toBe(404);
    const reader = new BetterSqlite3(database.url, { readonly: true });
    try {
      await waitUntil(
        () =>
          (reader
            .prepare('select count(*) from api_logs where project_id = ?')
            .pluck()
            .get(project.id) as number) === 1
            ? true
            : undefined,
        { timeoutMs: 30_000, what: 'the authenticated request in the API log' },
      );
      const unauthenticated = reader
        .prepare('select count(*) from api_logs where project_id is null')
        .pluck()
        .get() as number;
      // Nothing was lost: the buffer holds more than the lock let pile up here.
      expect(unauthenticated).toBeGreaterThanOrEqual(atRelease);
    } finally {
      reader.close();
    }

    // The buffer and what it had to drop are watched.
    const metrics = (await httpRequest(`${url}/metrics`)).body;
    expect(metrics).toMatch(/^herald_api_log_buffered \d+$/m);
    expect(metrics).toContain('# TYPE herald_api_log_dropped_total counter');

    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 300_000);
});
