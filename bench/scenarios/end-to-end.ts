/**
 * Figure 3, end to end: Herald delivering into smtp-sink under an open-loop load, after a warm-up
 * at the same rate that is not counted. At half its measured maximum accept rate (role `all`), and,
 * when the worker cannot keep up with that, at half its measured delivery rate, a load without a
 * growing backlog: with an API and a worker process (the deployment for that load, held to the
 * latency goal) and in role `all`. Accept→sent latency comes from the status body (sent_at −
 * created_at, both set by Herald); due→sent adds the time a request waited on the client side,
 * measured from the moment the schedule said it should go out (same clock).
 */
import { keepAliveAgent, runPool } from '../lib/http-client.js';
import {
  SEND_PATH,
  authHeaders,
  notificationStatus,
  sendBody,
  sendNotification,
  type Status,
} from '../lib/herald-api.js';
import { runPaced } from '../lib/paced-client.js';
import { progress } from '../lib/progress.js';
import type { Context, EndToEndResult } from '../lib/results.js';
import { startSink } from '../lib/smtp-sink.js';
import { percentile } from '../lib/stats.js';
import { waitDrained } from './drain.js';
import { prepareInstance, startRole } from './measure.js';

/** Status bodies read after the run: enough for a stable p99, few enough to read in seconds. */
const MAX_SAMPLED = 5_000;

async function waitUntilSent(check: () => Promise<Status>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let status: Status | undefined;
  while (performance.now() < deadline) {
    status = await check();
    if (status.status === 'sent') return;
    if (status.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const why = status?.error_message === undefined ? '' : `, error_message: ${status.error_message}`;
  throw new Error(
    `the first notification was not sent within ${timeoutMs / 1000}s (status: ${status?.status ?? 'unknown'}${why})`,
  );
}

/** One end-to-end run at `rate` requests per second on a fresh data directory `name`. */
export async function runEndToEnd(
  ctx: Context,
  rate: number,
  basis: string,
  name: string,
  sustained: boolean,
  processes: EndToEndResult['processes'] = 'all',
): Promise<EndToEndResult> {
  const durationS = ctx.settings.endToEndS;
  const sink = await startSink();
  try {
    const instance = await prepareInstance(ctx, name, { smtpUrl: sink.url });
    const herald = await startRole(ctx, instance, processes === 'all' ? 'all' : 'api');
    // The worker of a split deployment; in role `all` the one process does both.
    const worker = processes === 'all' ? herald : await startRole(ctx, instance, 'worker');
    const apiKey = instance.project.apiKey;
    const agent = keepAliveAgent(16);
    try {
      progress.start('end to end: first delivery');
      const first = await sendNotification(agent, herald.port, apiKey);
      await waitUntilSent(() => notificationStatus(agent, herald.port, apiKey, first.request_id), 30_000);

      // Like the accept figure, the measured run follows a warm-up at the same rate that is not
      // counted: a process just started runs its code unoptimised, and at this load the first
      // seconds build a backlog that the measured latencies would otherwise carry.
      progress.start(`end to end: warm-up, ${rate} req/s for ${ctx.settings.warmupS}s`);
      await runPaced({
        port: herald.port,
        rate,
        durationS: ctx.settings.warmupS,
        maxSockets: ctx.settings.connections,
        send: (index) => ({ path: SEND_PATH, headers: authHeaders(apiKey, true), body: sendBody(index + 1) }),
      });
      await waitDrained(
        instance.dataDir,
        'end to end: warm-up draining',
        ctx.settings.endToEndDrainS * 1000,
        worker.process,
      );

      let fired = 0;
      let answered = 0;
      progress.start(
        `end to end: ${rate} req/s for ${durationS}s`,
        () => `sent ${fired}  answered ${answered}`,
      );
      const samples = await runPaced({
        port: herald.port,
        rate,
        durationS,
        maxSockets: ctx.settings.connections,
        send: (index) => ({ path: SEND_PATH, headers: authHeaders(apiKey, true), body: sendBody(index + 1) }),
        onCount: (sent, done) => {
          fired = sent;
          answered = done;
        },
      });
      progress.stop();

      const accepted: { requestId: string; dueAt: number }[] = [];
      for (const sample of samples) {
        if (sample.response instanceof Error || sample.response.status !== 202) continue;
        const body = JSON.parse(sample.response.body) as { request_id?: string };
        if (typeof body.request_id === 'string')
          accepted.push({ requestId: body.request_id, dueAt: sample.dueAt });
      }
      await waitDrained(
        instance.dataDir,
        'end to end: draining',
        ctx.settings.endToEndDrainS * 1000,
        worker.process,
      );

      const step = Math.max(1, accepted.length / MAX_SAMPLED);
      const sampled = Array.from(
        { length: Math.min(accepted.length, MAX_SAMPLED) },
        (_, i) => accepted[Math.floor(i * step)]!,
      );
      const acceptToSent: number[] = [];
      const dueToSent: number[] = [];
      let failed = 0;
      let read = 0;
      progress.start('end to end: reading statuses', () => `${read}/${sampled.length}`);
      await runPool(sampled.length, 16, async (i) => {
        const { requestId, dueAt } = sampled[i]!;
        const status = await notificationStatus(agent, herald.port, apiKey, requestId);
        read += 1;
        if (status.status === 'failed') failed += 1;
        const sentAt = status.sent_at === undefined ? Number.NaN : Date.parse(status.sent_at);
        const createdAt = status.created_at === undefined ? Number.NaN : Date.parse(status.created_at);
        if (status.status !== 'sent' || Number.isNaN(sentAt) || Number.isNaN(createdAt)) {
          acceptToSent.push(Number.POSITIVE_INFINITY);
          dueToSent.push(Number.POSITIVE_INFINITY);
          return;
        }
        acceptToSent.push(sentAt - createdAt);
        dueToSent.push(sentAt - dueAt);
      });
      progress.stop();
      const responses = samples.map((s) => s.responseMs);
      const result: EndToEndResult = {
        basis,
        sustained,
        processes,
        rate,
        durationS,
        offered: samples.length,
        accepted: accepted.length,
        rejected: samples.length - accepted.length,
        sampled: sampled.length,
        sent: acceptToSent.filter(Number.isFinite).length,
        failed,
        acceptToSent: { p50Ms: percentile(acceptToSent, 50), p99Ms: percentile(acceptToSent, 99) },
        dueToSent: { p50Ms: percentile(dueToSent, 50), p99Ms: percentile(dueToSent, 99) },
        dueToResponse: { p50Ms: percentile(responses, 50), p99Ms: percentile(responses, 99) },
      };
      progress.log(
        `  end to end at ${rate} req/s: accept→sent p50 ${result.acceptToSent.p50Ms} ms, p99 ${result.acceptToSent.p99Ms} ms`,
      );
      return result;
    } finally {
      agent.destroy();
      if (worker !== herald) await worker.stop();
      await herald.stop();
    }
  } finally {
    await sink.stop();
  }
}
