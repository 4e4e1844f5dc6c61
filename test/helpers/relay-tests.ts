import { afterEach } from 'vitest';
import { createWorker as createHeraldWorker, type Worker } from '../../src/roles.js';
import type { StatusBody } from '../../src/services/notifications.js';
import type { DeliveryAttemptRow } from '../../src/storage/schema.js';
import { getStatus, sendOk } from './http.js';
import { createTestContext, seedProject, type TestContext } from './services.js';
import { SmtpSink } from './smtp-sink.js';
import { waitUntil } from './wait.js';

/**
 * What the tests that put Herald in front of real relays share: a context and a worker per test,
 * sends through the in-process API, and readers of each message's status and attempts. After each
 * test the worker stops before the context it uses, and only then what the test gave `cleanup`:
 * relays outlive the worker that keeps connections to them.
 */
export interface RelayTests {
  /** A fresh context over the file's environment and `env`, with its worker unless `startWorker` is false. */
  start(env?: Record<string, string>): Promise<TestContext>;
  /** The running test's context. */
  context(): TestContext;
  /** The test's worker, created but not started, for a test that queues mail or hooks in first. */
  createWorker(): Worker;
  /** Runs `stop` after the test, once the worker and the context are closed. */
  cleanup(stop: () => Promise<void>): void;
  /** A sink relay on `port` (any free one by default), stopped after the test. */
  sink(port?: number): Promise<SmtpSink>;
  /** A new project sending through `primary`, and through `fallback` when the primary fails. */
  projectVia(primary: string, fallback?: string | null): ReturnType<typeof seedProject>;
  /** Sends `user_created` to `to` (a 202, or the test fails) and returns its request id. */
  send(apiKey: string, to?: string): Promise<string>;
  status(apiKey: string, requestId: string): Promise<StatusBody>;
  /** The status once the message has left `queued`, waiting the file's time unless told otherwise. */
  finalStatus(apiKey: string, requestId: string, timeoutMs?: number): Promise<StatusBody>;
  /** The message's attempts so far, each as the relay it went to, its outcome and the reply. */
  attempts(requestId: string): Promise<Attempt[]>;
  /** The message's first attempt, once it is made. */
  firstAttempt(requestId: string): Promise<Attempt>;
}

export type Attempt = Pick<DeliveryAttemptRow, 'relay' | 'outcome' | 'response'>;

export interface RelayTestOptions {
  /** The file's environment, under each test's own. */
  readonly env: Record<string, string>;
  /** false: each test creates its worker with `createWorker`, after it queued mail or hooked in. */
  readonly startWorker?: boolean;
  /** How long to wait for an attempt or a final status. */
  readonly waitMs?: number;
}

/** Registers the teardown of each test of the file, so call it once, at the top of a test file. */
export function relayTests({ env, startWorker = true, waitMs = 20_000 }: RelayTestOptions): RelayTests {
  let ctx: TestContext | null = null;
  let worker: Worker | null = null;
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    // Every step runs whatever failed before it; the first failure is the test's.
    // The steps take the test's worker and context as they are now, before they are forgotten.
    const [ownWorker, ownCtx] = [worker, ctx];
    const steps = [() => ownWorker?.stop(), () => ownCtx?.close(), ...cleanups.splice(0)];
    worker = null;
    ctx = null;
    const failures: unknown[] = [];
    for (const step of steps) await Promise.resolve(step()).catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw failures[0];
  });

  const context = (): TestContext => {
    if (ctx === null) throw new Error('no context: the test has not called start()');
    return ctx;
  };
  const createWorker = (): Worker => {
    if (worker !== null) throw new Error('the test has its worker already');
    return (worker = createHeraldWorker(context().services));
  };
  const cleanup = (stop: () => Promise<void>) => void cleanups.push(stop);
  const status = async (apiKey: string, requestId: string) =>
    (await getStatus(context().app, apiKey, requestId)).json<StatusBody>();
  const attempts = async (requestId: string): Promise<Attempt[]> => {
    const { attempts: list } = await context().services.notifications.detail(requestId);
    return list.map((a) => ({ relay: a.relay, outcome: a.outcome, response: a.response }));
  };

  return {
    async start(overrides = {}) {
      // A 50 ms poll: a queued message is claimed well within the tests' waits.
      ctx = await createTestContext({ HERALD_DELIVERY_POLL_MS: '50', ...env, ...overrides });
      if (startWorker) createWorker().start();
      return ctx;
    },
    context,
    createWorker,
    cleanup,
    async sink(port = 0) {
      const started = await new SmtpSink().start(port);
      cleanup(() => started.stop());
      return started;
    },
    async projectVia(primary, fallback) {
      const seeded = await seedProject(context().services);
      await context().services.smtpSettings.setFromUrl(seeded.projectId, primary, { fallbackUrl: fallback });
      return seeded;
    },
    async send(apiKey, to = 'jane@example.org') {
      const body = { template: 'user_created', to, data: { user_name: 'Jane' } };
      return (await sendOk(context().app, apiKey, body)).request_id;
    },
    status,
    finalStatus(apiKey, requestId, timeoutMs = waitMs) {
      return waitUntil(
        async () => {
          const body = await status(apiKey, requestId);
          return body.status === 'queued' ? undefined : body;
        },
        { timeoutMs, intervalMs: 50, what: `${requestId} to finish` },
      );
    },
    attempts,
    firstAttempt(requestId) {
      return waitUntil(async () => (await attempts(requestId))[0], {
        timeoutMs: waitMs,
        intervalMs: 50,
        what: `${requestId}'s first attempt`,
      });
    },
  };
}
