import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { DEADLINE_EXCEEDED } from '../../src/mail/smtp.js';
import type { StatusBody } from '../../src/services/notifications.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §8 on one relay that two projects share (the operator's relay, or one provider's
 * host with two logins): a relay whose content filter never answers one project's messages after
 * their final dot. Those messages fail at the transaction deadline, as their own trouble; the
 * relay is neither judged down nor given a smaller window, so the other project's mail goes on
 * as before, each message on its first attempt.
 */

const TIMEOUT_MS = 1500;
const HANGING = 6;

let ctx: TestContext;
let worker: Worker;
let relay: SMTPServer;
let port: number;
/** Final dots the relay never answered: closed when the test ends. */
const unanswered: (() => void)[] = [];

beforeAll(async () => {
  relay = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        const hangs = session.envelope.rcptTo.some((rcpt) => rcpt.address.startsWith('filtered'));
        if (hangs) unanswered.push(() => callback(new Error('closing')));
        else callback();
      });
    },
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  port = (relay.server.address() as { port: number }).port;
  ctx = await createTestContext({
    HERALD_SMTP_TIMEOUT_MS: String(TIMEOUT_MS),
    HERALD_DELIVERY_MAX_ATTEMPTS: '1',
    HERALD_DELIVERY_POLL_MS: '20',
  });
  worker = createWorker(ctx.services);
  worker.start();
});

afterAll(async () => {
  await worker.stop();
  await ctx.close();
  for (const answer of unanswered.splice(0)) answer();
  await new Promise<void>((resolve) => relay.close(() => resolve()));
});

async function send(apiKey: string, to: string): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jane' } },
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

async function finalStatus(apiKey: string, requestId: string): Promise<StatusBody> {
  return waitUntil(
    async () => {
      const response = await ctx.app.inject({
        url: `/api/v1/notifications/${requestId}`,
        headers: { authorization: `Bearer ${apiKey}` },
      });
      const body = response.json<StatusBody>();
      return body.status === 'queued' ? undefined : body;
    },
    { timeoutMs: 30_000, intervalMs: 20, what: `${requestId} to finish` },
  );
}

describe('one project never takes a shared relay down for another', () => {
  it(
    "times out one project's messages on their own, leaving the relay up and its window whole",
    { timeout: 60_000 },
    async () => {
      const [filtered, other] = [await seedProject(ctx.services), await seedProject(ctx.services)];
      for (const project of [filtered, other])
        await ctx.services.smtpSettings.setFromUrl(
          project.projectId,
          `smtp://127.0.0.1:${port}?security=none`,
        );
      const shared = `127.0.0.1:${port}`;

      // More than the relay's first window (5): some of them start after others timed out.
      const hanging: string[] = [];
      for (let i = 0; i < HANGING; i++) hanging.push(await send(filtered.apiKey, `filtered${i}@example.org`));
      for (const id of hanging) {
        const body = await finalStatus(filtered.apiKey, id);
        expect(body.status).toBe('failed');
        expect(body.error_message).toContain(DEADLINE_EXCEEDED);
      }

      const rows = await ctx.services.storage.db.selectFrom('relay_health').selectAll().execute();
      expect(rows.filter((row) => row.down_since !== null)).toEqual([]);
      expect(worker.mail.relayWindows().get(shared)).toBe(5);

      const others: string[] = [];
      for (let i = 0; i < 10; i++) others.push(await send(other.apiKey, `user${i}@example.org`));
      for (const id of others) {
        const body = await finalStatus(other.apiKey, id);
        expect(body.status, body.error_message ?? '').toBe('sent');
        expect(body.attempts).toBe(1);
      }
    },
  );
});
