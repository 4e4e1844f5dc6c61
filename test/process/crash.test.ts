import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { testEnv } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A real `herald serve` process, killed with SIGKILL while it holds claimed mail, and stopped with
 * SIGTERM while SMTP transactions are in flight: after a restart every accepted message arrives
 * at the relay exactly once.
 */

const LEASE_MS = 1500;
let database: TestDatabase;
let sink: SmtpSink;
let services: Services;
let apiKey: string;
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
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'serve'], {
    env: { ...process.env, ...env, HERALD_PORT: String(port), HERALD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
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

async function sendMany(url: string, count: number): Promise<string[]> {
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

/** Messages at the relay per request id. */
function deliveries(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of sink.messages) {
    const id = String(message.parsed.headers.get('x-herald-request-id'));
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

beforeAll(async () => {
  sink = await new SmtpSink().start();
  database = await freshDatabase();
  env = testEnv(database, {
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_LEASE_MS: String(LEASE_MS),
    HERALD_DELIVERY_POLL_MS: '50',
    HERALD_DELIVERY_RETRY_BASE_MS: '50',
    HERALD_SMTP_TIMEOUT_MS: '20000',
  });
  const config = loadConfig(env);
  services = await openServices(config, createLogger('silent'));
  const { project } = await services.projects.create({ name: 'crash', fromEmail: 'noreply@crash.example' });
  apiKey = (await services.projects.rotateKey(project.id)).apiKey;
  await services.templates.create(project.id, {
    name: 'welcome',
    subject: 'Hi {{n}}',
    text: 'Message {{n}}',
  });
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await closeServices(services);
  await sink.stop();
  await database.drop();
});

describe('herald serve under failure', () => {
  it('delivers exactly once after a SIGKILL with claimed mail', async () => {
    sink.messages.length = 0;
    // The relay holds every connection before its greeting, so claimed mail stays in flight.
    sink.greetingDelayMs = 60_000;
    const first = await startHerald();
    const ids = await sendMany(first.url, 25);
    await waitUntil(async () => ((await services.notifications.counts()).sending === 25 ? true : undefined), {
      what: 'all 25 messages to be claimed',
    });
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    expect(sink.messages).toHaveLength(0);

    sink.greetingDelayMs = 0;
    const second = await startHerald();
    await sink.waitFor(25, 30_000);
    await waitUntil(async () => ((await services.notifications.counts()).sent === 25 ? true : undefined), {
      what: 'all 25 to be recorded sent',
    });
    const counts = deliveries();
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // Lease expiry reclaimed them: the killed process's claim counts as an attempt (it may have
    // reached the relay), but only the attempt that finished has an outcome.
    const { notification, attempts } = await services.notifications.detail(ids[0]!);
    expect(notification.attempts).toBe(2);
    expect(attempts.map((a) => a.outcome)).toEqual(['sent']);
    second.child.kill('SIGTERM');
    expect((await once(second.child, 'exit'))[0]).toBe(0);
  });

  it('finishes SMTP transactions in flight on SIGTERM and releases the rest', async () => {
    sink.messages.length = 0;
    sink.greetingDelayMs = 700;
    const first = await startHerald();
    const ids = await sendMany(first.url, 40);
    await waitUntil(async () => ((await services.notifications.counts()).sending > 0 ? true : undefined), {
      what: 'delivery to start',
    });
    first.child.kill('SIGTERM');
    const [code] = await once(first.child, 'exit');
    expect(code).toBe(0);
    const afterStop = await services.notifications.counts();
    // Nothing is left claimed: what was in flight finished, what was waiting went back to the queue.
    expect(afterStop.sending).toBe(0);
    expect(afterStop.sent).toBe(25 + sink.messages.length);
    expect(sink.messages.length).toBeGreaterThan(0);
    expect(sink.messages.length).toBeLessThan(40);
    expect(afterStop.queued + afterStop.sent).toBe(40 + 25);

    sink.greetingDelayMs = 0;
    const second = await startHerald();
    await waitUntil(async () => ((await services.notifications.counts()).sent === 65 ? true : undefined), {
      what: 'the rest to be delivered',
    });
    const counts = deliveries();
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    second.child.kill('SIGTERM');
    await once(second.child, 'exit');
  });
});
