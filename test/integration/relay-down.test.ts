import { describe, expect, it } from 'vitest';
import { changeRelayHealth } from '../../src/storage/relay-health.js';
import { deadRelay, freePort, type DeadKind } from '../helpers/dead-relays.js';
import { relayTests } from '../helpers/relay-tests.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §10 with real relays that fail: a relay that is down is not tried message by
 * message. Its mail reaches `failed` on its own retry schedule, whatever the number queued, while
 * the relay gets one probe connection at a time; when it comes back its mail flows at once, each
 * message once, and another project's mail never waits for it.
 */

const TIMEOUT_MS = 1500;
const RETRY_BASE_MS = 2000;
const QUEUED = 40;

// Each test queues its mail, or hooks into the worker, before the worker starts.
const { start, context, createWorker, cleanup, sink, projectVia, send, status, finalStatus } = relayTests({
  env: { HERALD_SMTP_TIMEOUT_MS: String(TIMEOUT_MS) },
  startWorker: false,
  waitMs: 60_000,
});

/** The relay's `herald_smtp_relay_up` as /metrics shows it. */
async function relayUp(relay: string): Promise<string | undefined> {
  const text = await context().services.metrics.render();
  return text
    .split('\n')
    .find((line) => line.startsWith(`herald_smtp_relay_up{relay="${relay}"}`))
    ?.split(' ')[1];
}

describe('a relay that is down is not tried message by message', () => {
  it.each<[DeadKind, string]>([
    ['silent', 'accepts connections and never speaks'],
    ['refuses', 'refuses connections'],
    ['greets-421', 'answers 421 at the greeting'],
  ])(
    '%s: a relay that %s: every message fails on its own schedule, with a probe at a time',
    { timeout: 120_000 },
    async (kind) => {
      const ctx = await start({
        HERALD_DELIVERY_MAX_ATTEMPTS: '2',
        HERALD_DELIVERY_RETRY_BASE_MS: String(RETRY_BASE_MS),
      });
      const dead = await deadRelay(kind, ctx.services.mailer);
      cleanup(() => dead.close());
      const project = await projectVia(`smtp://127.0.0.1:${dead.port}?security=none`);
      const ids: string[] = [];
      for (let i = 0; i < QUEUED; i++) ids.push(await send(project.apiKey, `user${i}@example.org`));
      const startedAt = Date.now();
      createWorker().start();

      // Seen at once: the dashboard's relays, /metrics, and the waiting messages say so.
      const relay = `127.0.0.1:${dead.port}`;
      const [down] = await waitUntil(
        async () => {
          const relays = await ctx.services.smtpSettings.relays(project.projectId);
          return relays[0]?.down ? relays : undefined;
        },
        { timeoutMs: 30_000, what: 'the relay to be judged down' },
      );
      expect(down).toMatchObject({ role: 'primary', relay, source: 'project' });
      expect(await relayUp(relay)).toBe('0');
      const waiting = await waitUntil(
        async () => {
          for (const id of ids) {
            const body = await status(project.apiKey, id);
            if (body.status === 'queued' && body.last_error?.startsWith('Relay down: ')) return body;
          }
          return undefined;
        },
        { what: 'a message waiting with "Relay down"' },
      );
      expect(waiting.next_attempt_at).toBeDefined();
      expect(waiting.attempts).toBe(1);

      const finals = [];
      for (const id of ids) finals.push(await finalStatus(project.apiKey, id));
      const elapsed = Date.now() - startedAt;
      for (const body of finals) {
        expect(body.status).toBe('failed');
        expect(body.attempts).toBe(2);
      }
      const notTried = finals.filter((body) => body.error_message?.startsWith('Relay down: ')).length;
      const row = (await ctx.services.storage.db
        .selectFrom('relay_health')
        .selectAll()
        .where('relay', '=', relay)
        .executeTakeFirstOrThrow())!;
      const downSince = Number(row.down_since);
      // Strictly after: a refused connection fails within the millisecond it started in, so the
      // attempts that made the relay down may carry the very millisecond it was judged down in.
      const afterDown = dead.connections.filter((at) => at > downSince).length;
      console.info(
        `relay down (${kind}): ${QUEUED} messages failed after ${elapsed} ms with ${dead.connections.length} ` +
          `connections in all, ${afterDown} after it was judged down (${row.probes} probes failed); ` +
          `${notTried} messages' last attempts were not made`,
      );
      // Two attempts each would have been 80 connections, each waiting a deadline in a window of one.
      expect(dead.connections.length).toBeLessThanOrEqual(20);
      // Once down: the probes, one at a time (the one in flight when the count was taken included).
      expect(afterDown).toBeLessThanOrEqual(row.probes + 1);
      expect(notTried).toBeGreaterThanOrEqual(QUEUED - 10);
      // The time to `failed` does not grow with the number queued: tried one deadline at a time,
      // the last of them would fail after more than (QUEUED - 5) deadlines.
      expect(elapsed).toBeLessThan((QUEUED - 5) * TIMEOUT_MS);
    },
  );
});

describe('a relay that comes back', () => {
  it(
    'gets all its mail within seconds of the next probe, each message once, in a small window first',
    { timeout: 120_000 },
    async () => {
      // A minute between retries: only the relay's return can make its mail due so soon.
      const ctx = await start({ HERALD_DELIVERY_MAX_ATTEMPTS: '5', HERALD_DELIVERY_RETRY_BASE_MS: '60000' });
      const port = await freePort();
      const healthy = await sink();
      const project = await projectVia(`smtp://127.0.0.1:${port}?security=none`);
      const other = await projectVia(healthy.url);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await send(project.apiKey, `user${i}@example.org`));
      const worker = createWorker();
      let windowOnReturn: number | undefined;
      const relay = `127.0.0.1:${port}`;
      const onChange = worker.mail.health.onChange;
      worker.mail.health.onChange = (changed, down) => {
        onChange(changed, down);
        if (changed === relay && !down) windowOnReturn = worker.mail.relayWindows().get(relay);
      };
      worker.start();
      await waitUntil(
        async () => ((await ctx.services.smtpSettings.relays(project.projectId))[0]?.down ? true : undefined),
        { timeoutMs: 30_000, what: 'the relay to be judged down' },
      );

      // Meanwhile another project's mail goes out as if nothing happened.
      const otherIds: string[] = [];
      for (let i = 0; i < 5; i++) otherIds.push(await send(other.apiKey, `other${i}@example.org`));
      for (const id of otherIds)
        expect((await finalStatus(other.apiKey, id, 10_000)).status, 'the other project').toBe('sent');

      const back = await sink(port);
      const backAt = Date.now();
      await back.waitFor(ids.length, 30_000);
      const flowedAfter = Date.now() - backAt;
      console.info(`relay back: its ${ids.length} messages arrived ${flowedAfter} ms after it came back`);
      expect(flowedAfter).toBeLessThan(10_000);
      for (const id of ids) {
        const body = await finalStatus(project.apiKey, id);
        expect(body).toMatchObject({ status: 'sent', relay: 'primary' });
      }
      // Each exactly once.
      const delivered = back.messages.map((m) => m.parsed.headers.get('x-herald-request-id'));
      expect(delivered.sort()).toEqual([...ids].sort());
      expect(windowOnReturn).toBe(1);
      expect(await relayUp(relay)).toBe('1');
    },
  );

  it(
    'starts small again in a worker that learned from another that it was down',
    { timeout: 120_000 },
    async () => {
      const ctx = await start({ HERALD_DELIVERY_MAX_ATTEMPTS: '5', HERALD_DELIVERY_RETRY_BASE_MS: '60000' });
      const first = await new SmtpSink().start();
      const port = first.port;
      const project = await projectVia(first.url);
      const worker = createWorker();
      worker.start();
      const relay = `127.0.0.1:${port}`;
      expect((await finalStatus(project.apiKey, await send(project.apiKey, 'a@example.org'))).status).toBe(
        'sent',
      );
      expect(worker.mail.relayWindows().get(relay)).toBe(5);
      await first.stop();

      // Another worker judged it down: this one made no attempt that failed.
      const now = Date.now();
      await changeRelayHealth(
        ctx.services.storage.db,
        { relay, host: '127.0.0.1', port, tls: false, trusted: false },
        now,
        () => ({
          failures: 3,
          downSince: now,
          lastError: 'connect ECONNREFUSED',
          probes: 0,
          probeAt: now + 1000,
        }),
      );
      await waitUntil(() => (worker.mail.health.downRelays().includes(relay) ? true : undefined), {
        what: 'the worker to learn that the relay is down',
      });
      let windowOnReturn: number | undefined;
      const onChange = worker.mail.health.onChange;
      worker.mail.health.onChange = (changed, down) => {
        onChange(changed, down);
        if (changed === relay && !down) windowOnReturn = worker.mail.relayWindows().get(relay);
      };
      const ids = await Promise.all([1, 2, 3, 4, 5].map((n) => send(project.apiKey, `u${n}@example.org`)));
      const waiting = await waitUntil(async () => {
        const body = await status(project.apiKey, ids[0]!);
        return body.last_error === undefined ? undefined : body;
      });
      // No attempt of its own: the error is the one the other worker recorded, or, on a machine slow
      // enough for this worker's first probe to have failed meanwhile, the probe's.
      expect(waiting.last_error).toMatch(
        /^Relay down: (connect ECONNREFUSED|The relay at .* \(ECONNREFUSED\))$/,
      );

      const back = await sink(port);
      await back.waitFor(ids.length, 30_000);
      expect(windowOnReturn).toBe(1);
    },
  );
});
