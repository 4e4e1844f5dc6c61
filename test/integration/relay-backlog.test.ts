import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { LOADED_FOR_MS } from '../../src/worker/loader.js';
import type { StatusBody } from '../../src/services/notifications.js';
import { deadRelay, type DeadRelay } from '../helpers/dead-relays.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §8 at the defaults, with one project's batch larger than the worker's lanes behind a
 * relay that never answers: the mail that finds its relay's window full waits beside it, and the
 * lanes it gave back go on through the rest of what was claimed, so another project's send is
 * claimed and delivered while the stalled relay's first transactions are still waiting for their
 * deadline.
 */

const DEADLINE_MS = 60_000;

let ctx: TestContext | null = null;
let worker: Worker | null = null;
let silent: DeadRelay | null = null;
let sink: SmtpSink | null = null;
/** Relays of a test, stopped after the worker that keeps connections to them. */
const relays: SmtpSink[] = [];

afterEach(async () => {
  await silent?.close();
  await worker?.stop();
  await ctx?.close();
  await sink?.stop();
  for (const relay of relays.splice(0)) await relay.stop();
  ctx = worker = silent = sink = null;
});

describe("a stalled relay's backlog", () => {
  it("never holds back another project's send until its deadline", { timeout: 60_000 }, async () => {
    ctx = await createTestContext({
      HERALD_SMTP_TIMEOUT_MS: String(DEADLINE_MS),
      HERALD_DELIVERY_POLL_MS: '50',
    });
    worker = createWorker(ctx.services);
    worker.start();
    silent = await deadRelay('silent', ctx.services.mailer);
    sink = await new SmtpSink().start();
    const stalled = await seedProject(ctx.services);
    await ctx.services.smtpSettings.setFromUrl(
      stalled.projectId,
      `smtp://127.0.0.1:${silent.port}?security=none`,
    );
    const healthy = await seedProject(ctx.services);
    await ctx.services.smtpSettings.setFromUrl(healthy.projectId, sink.url);

    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications/batch',
      headers: { authorization: `Bearer ${stalled.apiKey}` },
      payload: Array.from({ length: 100 }, (_, i) => ({
        template: 'user_created',
        to: `user${i}@example.org`,
        data: { user_name: 'Jane' },
      })),
    });
    expect(batch.statusCode).toBe(202);
    // The stalled relay has its window of transactions open before the other project sends.
    await waitUntil(() => (silent!.connections.length >= 5 ? true : undefined), {
      timeoutMs: 20_000,
      what: "the stalled relay's window",
    });

    const send = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${healthy.apiKey}` },
      payload: { template: 'user_created', to: 'jane@example.org', data: { user_name: 'Jane' } },
    });
    expect(send.statusCode).toBe(202);
    const requestId = send.json<{ request_id: string }>().request_id;
    const sent = await waitUntil(
      async () => {
        const response = await ctx!.app.inject({
          url: `/api/v1/notifications/${requestId}`,
          headers: { authorization: `Bearer ${healthy.apiKey}` },
        });
        const body = response.json<StatusBody>();
        return body.status === 'sent' ? body : undefined;
      },
      { timeoutMs: DEADLINE_MS / 2, what: "the healthy project's send" },
    );
    expect(sent.status).toBe('sent');
    expect(sink.messages).toHaveLength(1);
    // No transaction to the stalled relay has ended yet: none of its mail is sent or failed.
    const counts = await ctx.services.notifications.counts(stalled.projectId);
    expect(counts).toMatchObject({ sent: 0, failed: 0 });
    expect(counts.queued + counts.sending).toBe(100);
  });

  it('goes to the new relay once the SMTP settings change, not only the mail claimed after', async () => {
    ctx = await createTestContext({ HERALD_DELIVERY_POLL_MS: '50' });
    worker = createWorker(ctx.services);
    worker.start();
    const old = await new SmtpSink().start();
    const moved = await new SmtpSink().start();
    relays.push(old, moved);
    const project = await seedProject(ctx.services);
    await ctx.services.smtpSettings.setFromUrl(project.projectId, old.url);
    old.hold();
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications/batch',
      headers: { authorization: `Bearer ${project.apiKey}` },
      payload: Array.from({ length: 20 }, (_, i) => ({
        template: 'user_created',
        to: `user${i}@example.org`,
        data: { user_name: 'Jane' },
      })),
    });
    expect(batch.statusCode).toBe(202);
    // The old relay's window of them is in transactions; the rest are claimed and wait beside it.
    await waitUntil(() => (old.waiting === 5 ? true : undefined), { what: "the old relay's window" });
    await ctx.services.smtpSettings.setFromUrl(project.projectId, moved.url);
    // Longer than what a worker loaded is trusted for.
    await new Promise((resolve) => setTimeout(resolve, LOADED_FOR_MS + 200));
    old.release();
    await waitUntil(
      async () =>
        (await ctx!.services.notifications.counts(project.projectId)).sent === 20 ? true : undefined,
      { timeoutMs: 20_000, what: 'all 20 sent' },
    );
    expect(old.messages).toHaveLength(5);
    expect(moved.messages).toHaveLength(15);
  });
});
