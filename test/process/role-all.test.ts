import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/open.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import {
  cliProjectWithTemplate,
  firstCall,
  HeraldProcess,
  heraldJson,
  scheduleAndCancel,
  WebhookReceiver,
} from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * `herald serve` (role all) delivers in a child process of its own, off the API's event loop
 * (product.md §14): a real process tree, a real relay. The child is restarted when it dies, with
 * the death logged, and a SIGTERM stops both, each finishing its work.
 */

let database: TestDatabase;
let sink: SmtpSink;
let env: Record<string, string>;
let herald: HeraldProcess | null = null;

beforeAll(async () => {
  database = await freshDatabase();
  sink = await new SmtpSink().start();
  env = testEnv(database, {
    HERALD_SMTP_URL: sink.url,
    HERALD_HOST: '127.0.0.1',
    HERALD_PORT: '0',
    HERALD_LOG_LEVEL: 'info',
    HERALD_DELIVERY_POLL_MS: '200',
  });
});
afterAll(async () => {
  herald?.kill('SIGKILL');
  await herald?.exited;
  await sink?.stop();
  await database?.drop();
});

/** Process ids of the living children of a process (Linux /proc). */
async function childrenOf(pid: number): Promise<number[]> {
  const { readFile } = await import('node:fs/promises');
  try {
    const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8');
    return text.trim() === '' ? [] : text.trim().split(/\s+/).map(Number);
  } catch {
    return [];
  }
}

async function send(url: string, apiKey: string, to: string): Promise<string> {
  const response = await fetch(`${url}/api/v1/notifications`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ template: 'welcome', to, data: { name: to } }),
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { request_id: string }).request_id;
}

/** The token a process's notices of queued work carry, from its command line (Linux /proc). */
async function noticeTokenOf(pid: number): Promise<string | undefined> {
  const { readFile } = await import('node:fs/promises');
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  const at = args.indexOf('--notice-token');
  return at === -1 ? undefined : args[at + 1];
}

const deliveredTo = (to: string) => sink.messages.filter((m) => m.envelopeTo.includes(to)).length;

describe('role all', () => {
  it(
    'delivers from a child process, restarts it when it dies, and stops both on SIGTERM',
    { timeout: 120_000 },
    async () => {
      const apiKey = await cliProjectWithTemplate(env, 'all', { subject: 'Hi {{name}}' });
      herald = new HeraldProcess('all', ['serve'], env);
      const url = await herald.url();
      const started = herald.output();
      const workerPid = Number(/"workerPid":(\d+)/.exec(started)?.[1]);
      expect(workerPid).toBeGreaterThan(0);
      expect(await childrenOf(herald.pid)).toContain(workerPid);
      // The child takes its parent's notices of queued work (PostgreSQL) for its own: the parent
      // wakes it over IPC already.
      const token = await noticeTokenOf(workerPid);
      expect(token).toMatch(/^[0-9a-f]{16}$/);

      await send(url, apiKey, 'first@example.org');
      await waitUntil(() => (deliveredTo('first@example.org') === 1 ? true : undefined), {
        what: 'the first message at the relay',
      });
      // The API's /metrics has what the child counted, once (its outcome is recorded just after
      // the relay's answer), beside the API's own.
      const metrics = await waitUntil(
        async () => {
          const text = await (await fetch(`${url}/metrics`)).text();
          return /^herald_notifications_delivered_total\{[^}]*outcome="sent"[^}]*\} 1$/m.test(text)
            ? text
            : undefined;
        },
        { what: "the child's delivery counted in the API's /metrics" },
      );
      expect(metrics).toMatch(/^herald_smtp_transaction_duration_seconds_count\{[^}]*\} 1$/m);
      expect(metrics).toMatch(/^herald_notifications_accepted_total\{[^}]*outcome="accepted"\} 1$/m);
      expect(metrics.match(/^herald_queue_depth\{state="queued"\} \d+$/gm)).toHaveLength(1);

      // The child dies: the API goes on answering, and the child comes back, logged.
      process.kill(workerPid, 'SIGKILL');
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      await send(url, apiKey, 'second@example.org');
      await waitUntil(
        () => (herald!.output().includes('the worker process is running again') ? true : undefined),
        { timeoutMs: 60_000, what: 'the worker process to be restarted' },
      );
      expect(herald.problems.some((line) => line.includes('the worker process died; restarting it'))).toBe(
        true,
      );
      await waitUntil(() => (deliveredTo('second@example.org') === 1 ? true : undefined), {
        what: 'the message accepted while the child was down, at the relay',
      });
      const restarted = (await childrenOf(herald.pid)).filter((pid) => pid !== workerPid);
      expect(restarted).toHaveLength(1);
      expect(await noticeTokenOf(restarted[0]!)).toBe(token);

      herald.kill('SIGTERM');
      expect(await herald.exited).toBe(0);
      // The child stopped with it, not left behind.
      await waitUntil(
        async () => {
          const { access } = await import('node:fs/promises');
          return access(`/proc/${restarted[0]}`).then(
            () => undefined,
            () => true,
          );
        },
        { what: 'the worker process to exit with its parent' },
      );
      expect(deliveredTo('first@example.org') + deliveredTo('second@example.org')).toBe(2);
    },
  );

  it(
    'stops once when SIGTERM reaches the whole process group: mail in flight finishes, none is sent twice',
    { timeout: 120_000 },
    async () => {
      const apiKey = await cliProjectWithTemplate(env, 'group');
      herald = new HeraldProcess('all-group', ['serve'], env);
      const url = await herald.url();
      sink.hold();
      const recipients = Array.from({ length: 6 }, (_, i) => `group-${i}@example.org`);
      for (const to of recipients) await send(url, apiKey, to);
      await waitUntil(() => (sink.waiting > 0 ? true : undefined), { what: 'a transaction at the relay' });

      // Both processes get SIGTERM; the child must not take its parent's stop for a second signal.
      herald.killGroup('SIGTERM');
      setTimeout(() => sink.release(), 500);
      expect(await herald.exited).toBe(0);
      expect(herald.output()).not.toContain('second signal');

      // What was not started went back to the queue; a restart delivers it, each message once.
      sink.acceptAgain();
      herald = new HeraldProcess('all-group-again', ['serve'], env);
      await herald.url();
      await waitUntil(() => (recipients.every((to) => deliveredTo(to) >= 1) ? true : undefined), {
        timeoutMs: 60_000,
        what: 'every message at the relay',
      });
      expect(recipients.map(deliveredTo)).toEqual(recipients.map(() => 1));
      herald.kill('SIGTERM');
      expect(await herald.exited).toBe(0);
    },
  );

  it(
    "tells its delivery process of a cancel's webhook at once, not at the next poll",
    { timeout: 120_000 },
    async () => {
      const apiKey = await cliProjectWithTemplate(env, 'cancels');
      const receiver = new WebhookReceiver();
      try {
        await heraldJson(['webhook', 'create', '--project', 'cancels', '--url', await receiver.start()], env);
        // The poll is far beyond the wait: the API process's cancel must reach the delivery
        // process as a wake (on SQLite it also sees the commit; on PostgreSQL only the wake tells).
        herald = new HeraldProcess('all-cancel', ['serve'], { ...env, HERALD_DELIVERY_POLL_MS: '60000' });
        const requestId = await scheduleAndCancel(await herald.url(), apiKey);
        expect(await firstCall(receiver, "the cancel's webhook call")).toMatchObject({
          type: 'notification.failed',
          data: { request_id: requestId, error_message: 'Canceled' },
        });
        herald.kill('SIGTERM');
        expect(await herald.exited).toBe(0);
      } finally {
        receiver.close();
      }
    },
  );

  it(
    'cancels mail its delivery process claimed but has not begun to send, told at once',
    { timeout: 120_000 },
    async () => {
      const apiKey = await cliProjectWithTemplate(env, 'claimed');
      const receiver = new WebhookReceiver();
      const storage = openStorage(loadConfig(env).database);
      const stateOf = async (requestId: string) =>
        (
          await storage.db
            .selectFrom('notifications')
            .select('state')
            .where('request_id', '=', requestId)
            .executeTakeFirstOrThrow()
        ).state;
      sink.hold();
      try {
        await heraldJson(['webhook', 'create', '--project', 'claimed', '--url', await receiver.start()], env);
        // One transaction at a time to the relay, so the second message waits, claimed, behind
        // the first; and the poll far beyond the wait, so only the API process's wake tells.
        herald = new HeraldProcess('all-claimed', ['serve'], {
          ...env,
          HERALD_SMTP_MAX_CONNECTIONS: '1',
          HERALD_DELIVERY_POLL_MS: '60000',
        });
        const url = await herald.url();
        const first = await send(url, apiKey, 'claimed-first@example.org');
        await waitUntil(() => (sink.waiting === 1 ? true : undefined), { what: 'the first transaction' });
        const second = await send(url, apiKey, 'claimed-second@example.org');
        await waitUntil(async () => ((await stateOf(second)) === 'sending' ? true : undefined), {
          what: 'the delivery process to claim the second',
        });
        const cancel = (id: string) =>
          fetch(`${url}/api/v1/notifications/${id}`, {
            method: 'DELETE',
            headers: { authorization: `Bearer ${apiKey}` },
          });
        const canceled = await cancel(second);
        expect(canceled.status).toBe(200);
        expect(await canceled.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
        expect((await cancel(first)).status).toBe(409);
        expect(await firstCall(receiver, "the cancel's webhook call")).toMatchObject({
          type: 'notification.failed',
          data: { request_id: second, error_message: 'Canceled' },
        });
        sink.release();
        await waitUntil(async () => ((await stateOf(first)) === 'sent' ? true : undefined), {
          what: 'the first to be sent',
        });
        expect(deliveredTo('claimed-first@example.org')).toBe(1);
        expect(deliveredTo('claimed-second@example.org')).toBe(0);
        herald.kill('SIGTERM');
        expect(await herald.exited).toBe(0);
      } finally {
        sink.release();
        receiver.close();
        await storage.close();
      }
    },
  );
});
