import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { testEnv } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { HERALD_CLI, killGroup } from '../helpers/processes.js';

/**
 * A real `herald serve` process, killed with SIGKILL while it holds claimed mail, and stopped with
 * SIGTERM while SMTP transactions are in flight: after a restart every accepted message arrives
 * at the relay exactly once. Each test has a project of its own and counts only its own messages;
 * the relay holds transactions until the test lets them go, so nothing depends on timing.
 */

/**
 * Far longer than any wait below: mail a killed worker held comes back through its stopped
 * heartbeat, never through lease expiry.
 */
const LEASE_MS = 600_000;
let database: TestDatabase;
let sink: SmtpSink;
let services: Services;
let env: Record<string, string>;
const children = new Set<ChildProcess>();

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

async function startHerald(): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...HERALD_CLI, 'serve'], {
    env: { ...process.env, ...env, HERALD_PORT: String(port), HERALD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
    // Its own process group, so that a kill -9 takes its delivery process too (killGroup).
    detached: true,
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`herald exited with ${child.exitCode}`);
      const ok = await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      return ok ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'herald to listen' },
  );
  return { child, url };
}

interface TestProject {
  readonly id: number;
  readonly apiKey: string;
}

async function newProject(name: string): Promise<TestProject> {
  const { project, apiKey } = await services.projects.create({ name, fromEmail: 'noreply@crash.example' });
  await services.templates.create(project.id, {
    name: 'welcome',
    subject: 'Hi {{n}}',
    text: 'Message {{n}}',
  });
  return { id: project.id, apiKey };
}

async function sendMany(url: string, { apiKey }: TestProject, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await fetch(`${url}/api/v1/notifications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ template: 'welcome', to: `user${i}@example.org`, data: { n: String(i) } }),
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { request_id: string }).request_id);
  }
  return ids;
}

/** Messages at the relay per request id, for the given request ids only. */
function deliveries(ids: readonly string[]): Map<string, number> {
  const wanted = new Set(ids);
  const counts = new Map<string, number>();
  for (const message of sink.messages) {
    const id = String(message.parsed.headers.get('x-herald-request-id'));
    if (wanted.has(id)) counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

const counts = (project: TestProject) => services.notifications.counts(project.id);

beforeAll(async () => {
  sink = await new SmtpSink().start();
  database = await freshDatabase();
  env = testEnv(database, {
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_LEASE_MS: String(LEASE_MS),
    HERALD_DELIVERY_POLL_MS: '50',
    // Long enough that a message refused while Herald stops is not retried before it has stopped,
    // short enough that the restarted process sends it at once.
    HERALD_DELIVERY_RETRY_BASE_MS: '2000',
    HERALD_SMTP_TIMEOUT_MS: '20000',
  });
  const config = loadConfig(env);
  services = await openServices(config, createLogger('silent'));
});

// A test that fails midway must not leave a server behind to claim the next test's mail.
afterEach(() => {
  for (const child of children) killGroup(child);
});

afterAll(async () => {
  await closeServices(services);
  await sink.stop();
  await database.drop();
});

describe('herald serve under failure', () => {
  // Each test starts Herald twice, two processes each (role all delivers in a child process).
  it(
    'delivers exactly once, within 10 s of the restart, after a SIGKILL with claimed mail',
    { timeout: 90_000 },
    async () => {
      const project = await newProject('killed');
      // The relay holds every transaction at MAIL FROM, so claimed mail stays in flight.
      sink.hold();
      const first = await startHerald();
      const ids = await sendMany(first.url, project, 25);
      // The relay's share of the lanes is in SMTP transactions, held; more are claimed and parked
      // behind them, the rest wait in the queue.
      await waitUntil(
        async () => (sink.waiting >= 5 && (await counts(project)).sending >= 5 ? true : undefined),
        { what: 'messages to be claimed and in flight at the relay' },
      );
      killGroup(first.child);
      await once(first.child, 'exit');
      // The held transactions of the dead process are dropped with its connections.
      sink.release();
      expect(deliveries(ids).size).toBe(0);

      const second = await startHerald();
      const restartedAt = Date.now();
      // product.md §8: in-flight mail is retried within 10 s of the restart, with a lease of ten
      // minutes still running.
      await waitUntil(async () => ((await counts(project)).sent === 25 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'all 25 to be recorded sent within 10 s of the restart',
      });
      console.info(
        `crash: the killed worker's 25 messages were sent ${Date.now() - restartedAt} ms after the restart`,
      );
      const delivered = deliveries(ids);
      expect([...delivered.keys()].sort()).toEqual([...ids].sort());
      expect([...delivered.values()].every((n) => n === 1)).toBe(true);
      // The dead worker's stopped heartbeat gave them back: the killed process's claim counts as an
      // attempt, on record as interrupted (it may have reached the relay), before the one sent.
      const { notification, attempts } = await services.notifications.detail(ids[0]!);
      expect(notification.attempts).toBe(2);
      expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
        [1, 'interrupted'],
        [2, 'sent'],
      ]);
      second.child.kill('SIGTERM');
      expect((await once(second.child, 'exit'))[0]).toBe(0);
    },
  );

  it(
    'finishes SMTP transactions in flight on SIGTERM and releases the rest',
    { timeout: 90_000 },
    async () => {
      const project = await newProject('stopped');
      sink.hold();
      const first = await startHerald();
      const ids = await sendMany(first.url, project, 40);
      await waitUntil(() => (sink.waiting > 0 ? true : undefined), { what: 'SMTP transactions to start' });
      first.child.kill('SIGTERM');
      // The HTTP server stops first; once it no longer answers 200, the stop is under way. The
      // transactions held until now are in flight and must finish; any that would start later is
      // refused (451), so exactly the released ones can reach the relay.
      await waitUntil(
        async () => {
          const ok = await fetch(`${first.url}/healthz`).then(
            (r) => r.ok,
            () => false,
          );
          return ok ? undefined : true;
        },
        { what: 'the stop to begin' },
      );
      const inFlight = sink.release({ refuseLater: true });
      const [code] = await once(first.child, 'exit');
      expect(code).toBe(0);
      const afterStop = await counts(project);
      // Nothing is left claimed: what was in flight finished, what was waiting went back to the queue.
      expect(afterStop.sending).toBe(0);
      expect(inFlight).toBeGreaterThan(0);
      expect(afterStop.sent).toBe(inFlight);
      expect(deliveries(ids).size).toBe(inFlight);
      expect(afterStop.queued).toBe(40 - inFlight);

      sink.acceptAgain();
      const second = await startHerald();
      await waitUntil(async () => ((await counts(project)).sent === 40 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the rest to be delivered',
      });
      const delivered = deliveries(ids);
      expect([...delivered.keys()].sort()).toEqual([...ids].sort());
      expect([...delivered.values()].every((n) => n === 1)).toBe(true);
      second.child.kill('SIGTERM');
      await once(second.child, 'exit');
    },
  );

  it('keeps all of a batch or none of it when killed while accepting it', { timeout: 300_000 }, async () => {
    const body = JSON.stringify(
      Array.from({ length: 500 }, (_, i) => ({
        template: 'welcome',
        to: `u${i}@example.org`,
        data: { n: `${i}` },
      })),
    );
    const seen: string[] = [];
    // From the moment the request leaves to well after: the kill lands before the body is read,
    // while the transaction runs, or after the commit.
    for (const delayMs of [0, 5, 10, 20, 25, 30, 35, 40, 80]) {
      const project = await newProject(`batch-killed-${delayMs}`);
      const herald = await startHerald();
      const reply = fetch(`${herald.url}/api/v1/notifications/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${project.apiKey}`, 'content-type': 'application/json' },
        body,
      }).then(
        (r) => r.status,
        () => null,
      );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      killGroup(herald.child);
      await once(herald.child, 'exit');
      const status = await reply;
      const stored = Object.values(await counts(project)).reduce((a, b) => a + b, 0);
      expect([0, 500], `killed after ${delayMs} ms`).toContain(stored);
      // A 202 promises the whole batch is durable.
      if (status === 202) expect(stored).toBe(500);
      seen.push(`${delayMs} ms: ${status ?? 'no answer'}, ${stored} stored`);
    }
    console.info(`batch killed mid-request: ${seen.join('; ')}`);
  });
});
