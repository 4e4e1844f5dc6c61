/**
 * Figure 2, delivery throughput: N notifications are queued through role `api` (no worker), then
 * role `worker` drains them into smtp-sink. The baseline is smtp-source sending N messages of the
 * same size over keep-alive sessions to a sink of its own in the same run. Both rates are taken at
 * the sink, from the first to the N-th message to arrive; peak RSS of both Herald processes is
 * kept for figure 5.
 */
import { join } from 'node:path';
import { keepAliveAgent, runPool } from '../lib/http-client.js';
import { sendNotification } from '../lib/herald-api.js';
import { progress } from '../lib/progress.js';
import type { Context, DeliveryResult } from '../lib/results.js';
import { dumpedMessageSizes, startSink, type Sink, type SinkWait } from '../lib/smtp-sink.js';
import { runSmtpSource } from '../lib/smtp-source.js';
import { openStateCounts } from '../lib/sqlite-file.js';
import { databaseFile, drainIntoSink } from './drain.js';
import { prepareInstance, startRole } from './measure.js';

/** smtp-source payload when Herald's message size could not be learnt. */
const DEFAULT_PAYLOAD_BYTES = 600;
const PROBE_MESSAGES = 3;

function rateOf(wait: SinkWait, count: number): number {
  if (wait.firstAt === undefined) return 0;
  const end = wait.lastAt ?? performance.now();
  const messages = wait.reached ? count - 1 : wait.count - 1;
  return end > wait.firstAt ? messages / ((end - wait.firstAt) / 1000) : 0;
}

/** How the sink of a delivery figure behaves: a local relay, or one that takes `delayS` per message. */
export interface RelayShape {
  /** Names the figure in progress lines and data directories. */
  readonly name: string;
  readonly delayS?: number;
  /** Longest either side may take to deliver every message; the run's drain timeout otherwise. */
  readonly timeoutS?: number;
}

const LOCAL: RelayShape = { name: 'delivery' };

async function withSink<T>(
  options: { dumpFile?: string; delayS?: number },
  fn: (sink: Sink) => Promise<T>,
): Promise<T> {
  const sink = await startSink(options);
  try {
    return await fn(sink);
  } finally {
    await sink.stop();
  }
}

/** Average size of a message Herald sends for the bench template, as smtp-sink stores it. */
async function heraldMessageBytes(ctx: Context, relay: RelayShape): Promise<number> {
  const dumpFile = join(ctx.workDir, 'dumps', `${relay.name}-herald.txt`);
  await withSink({ dumpFile }, async (sink) => {
    const instance = await prepareInstance(ctx, `${relay.name}-probe`, { smtpUrl: sink.url });
    const herald = await startRole(ctx, instance, 'all');
    try {
      const agent = keepAliveAgent(1);
      for (let i = 0; i < PROBE_MESSAGES; i += 1)
        await sendNotification(agent, herald.port, instance.project.apiKey, i);
      agent.destroy();
      const wait = await drainIntoSink(sink, PROBE_MESSAGES, {
        dataDir: instance.dataDir,
        label: `${relay.name}: learning the size of a Herald message`,
        timeoutMs: 30_000,
        process: herald.process,
      });
      if (!wait.reached)
        throw new Error(`only ${wait.count} of ${PROBE_MESSAGES} probe messages arrived within 30s`);
    } finally {
      await herald.stop();
    }
  });
  const sizes = await dumpedMessageSizes(dumpFile);
  if (sizes.length === 0) throw new Error('the probe messages were not found in the sink dump');
  return Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length);
}

/** Bytes smtp-source adds to its -l payload (its own header lines), measured the same way. */
async function sourceOverheadBytes(ctx: Context, relay: RelayShape): Promise<number> {
  const dumpFile = join(ctx.workDir, 'dumps', `${relay.name}-source.txt`);
  const payload = 100;
  await withSink({ dumpFile }, async (sink) => {
    await runSmtpSource({
      port: sink.port,
      messages: 1,
      sessions: 1,
      payloadBytes: payload,
      timeoutMs: 10_000,
    });
    await sink.waitFor(1, 5_000);
  });
  const [size] = await dumpedMessageSizes(dumpFile);
  if (size === undefined) throw new Error('the smtp-source probe message was not found in the sink dump');
  return size - payload;
}

async function measureSource(ctx: Context, out: DeliveryResult, relay: RelayShape): Promise<void> {
  const count = out.count;
  await withSink({ delayS: relay.delayS }, async (sink) => {
    progress.start(`${relay.name}: smtp-source, ${count} messages`, () => `sink ${sink.count()}/${count}`);
    out.sourceCommand = await runSmtpSource({
      port: sink.port,
      messages: count,
      sessions: out.sessions,
      payloadBytes: out.sourcePayloadBytes,
      timeoutMs: (relay.timeoutS ?? ctx.settings.drainTimeoutS) * 1000,
    });
    const wait = await sink.waitFor(count, 10_000);
    progress.stop();
    if (!wait.reached)
      throw new Error(`smtp-source: only ${wait.count} of ${count} messages reached the sink`);
    out.sourceRate = rateOf(wait, count);
    out.sourceSeconds = ((wait.lastAt ?? 0) - (wait.firstAt ?? 0)) / 1000;
    progress.log(`  ${relay.name}, smtp-source: ${Math.round(out.sourceRate)} msgs/s`);
  });
}

async function measureHerald(ctx: Context, out: DeliveryResult, relay: RelayShape): Promise<void> {
  const count = out.count;
  const instance = await prepareInstance(ctx, relay.name);
  const api = await startRole(ctx, instance, 'api');
  let filled = 0;
  try {
    const agent = keepAliveAgent(ctx.settings.connections);
    progress.start(`${relay.name}: queueing ${count} through role api`, () => `${filled}/${count}`);
    const started = performance.now();
    await runPool(count, ctx.settings.connections, async (i) => {
      await sendNotification(agent, api.port, instance.project.apiKey, i);
      filled += 1;
    });
    out.fillRate = count / ((performance.now() - started) / 1000);
    agent.destroy();
  } finally {
    progress.stop();
    out.rssMb.fill = await api.stop();
  }
  const view = openStateCounts(databaseFile(instance.dataDir));
  const before = view.read();
  view.close();
  if (before.queued !== count)
    throw new Error(`after ${count} accepted sends ${before.queued} are queued (expected all)`);

  await withSink({ delayS: relay.delayS }, async (sink) => {
    const spawned = performance.now();
    const worker = await startRole(ctx, instance, 'worker', { smtpUrl: sink.url });
    try {
      const wait = await drainIntoSink(sink, count, {
        dataDir: instance.dataDir,
        label: `${relay.name}: role worker draining ${count}`,
        timeoutMs: (relay.timeoutS ?? ctx.settings.drainTimeoutS) * 1000,
        process: worker.process,
      });
      out.timedOut = !wait.reached;
      out.heraldRate = rateOf(wait, count);
      out.heraldSeconds = ((wait.lastAt ?? performance.now()) - (wait.firstAt ?? spawned)) / 1000;
      out.heraldSecondsFromSpawn = ((wait.lastAt ?? performance.now()) - spawned) / 1000;
      progress.log(
        `  ${relay.name}, Herald worker: ${Math.round(out.heraldRate)} msgs/s${out.timedOut ? ` (timed out at ${wait.count})` : ''}`,
      );
    } finally {
      progress.stop();
      out.rssMb.worker = await worker.stop();
    }
  });
  const after = openStateCounts(databaseFile(instance.dataDir));
  const counts = after.read();
  after.close();
  out.delivered = counts.sent;
  out.failed = counts.failed;
}

/**
 * Both sides of a delivery figure: Herald's message size is learnt first, so that smtp-source
 * sends messages of the same size, then smtp-source and Herald each send `out.count` messages into
 * a sink of the given shape.
 */
export async function runDelivery(
  ctx: Context,
  out: DeliveryResult,
  problem: (message: string) => void,
  relay: RelayShape = LOCAL,
): Promise<void> {
  let overhead: number | undefined;
  try {
    overhead = await sourceOverheadBytes(ctx, relay);
  } catch (error) {
    problem(`measuring smtp-source's header size: ${(error as Error).message}`);
  }
  if (ctx.herald !== undefined) {
    try {
      out.heraldMessageBytes = await heraldMessageBytes(ctx, relay);
    } catch (error) {
      problem(`probe of Herald's message size: ${(error as Error).message}`);
    }
  }
  out.sourcePayloadBytes =
    out.heraldMessageBytes !== undefined && overhead !== undefined
      ? Math.max(1, out.heraldMessageBytes - overhead)
      : DEFAULT_PAYLOAD_BYTES;

  await measureSource(ctx, out, relay);
  if (ctx.herald === undefined) return;
  await measureHerald(ctx, out, relay);
}
