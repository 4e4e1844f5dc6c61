/**
 * Waiting for Herald's queue to empty, bounded in time. Progress comes from the notification
 * counts by state, read from the SQLite file (read-only) a few times a second; a wait ends early
 * when nothing is left queued or sending, so failing deliveries cost seconds, not the timeout.
 */
import { join } from 'node:path';
import { openStateCounts, type StateCounts } from '../lib/sqlite-file.js';
import { progress } from '../lib/progress.js';
import type { Tracked } from '../lib/processes.js';
import type { Sink, SinkWait } from '../lib/smtp-sink.js';

const POLL_MS = 250;

export function databaseFile(dataDir: string): string {
  return join(dataDir, 'herald.db');
}

export interface Drained {
  counts: StateCounts;
  drained: boolean;
  /** error_message of a failed notification, when any failed. */
  error: string | undefined;
}

function countsText(counts: StateCounts): string {
  return `queued ${counts.queued}  sending ${counts.sending}  sent ${counts.sent}  failed ${counts.failed}`;
}

/**
 * Polls until nothing is queued or sending, `timeoutMs` is over, `stopEarly` says so, or
 * `process` exits (an error).
 */
export async function waitDrained(
  dataDir: string,
  label: string,
  timeoutMs: number,
  process: Tracked,
  stopEarly: () => boolean = () => false,
): Promise<Drained> {
  const view = openStateCounts(databaseFile(dataDir));
  let counts = view.read();
  progress.start(label, () => countsText(counts));
  const deadline = performance.now() + timeoutMs;
  try {
    while (counts.queued + counts.sending > 0 && !stopEarly() && performance.now() < deadline) {
      if (process.hasExited()) throw new Error(`${process.name} exited with ${countsText(counts)}`);
      await new Promise((r) => setTimeout(r, POLL_MS));
      counts = view.read();
    }
    return {
      counts,
      drained: counts.queued + counts.sending === 0,
      error: counts.failed > 0 ? view.someError() : undefined,
    };
  } finally {
    progress.stop();
    view.close();
  }
}

/**
 * Waits for `target` messages at the sink. Throws, saying why, when Herald has resolved every
 * notification but fewer than `target` arrived (some failed, or were marked sent without reaching
 * the sink), or when its process exits; returns `reached: false` on timeout.
 */
export async function drainIntoSink(
  sink: Sink,
  target: number,
  options: { dataDir: string; label: string; timeoutMs: number; process: Tracked },
): Promise<SinkWait> {
  const arrived = sink.waitFor(target, options.timeoutMs);
  let done = false;
  void arrived.then(() => (done = true));
  const state = await waitDrained(
    options.dataDir,
    options.label,
    options.timeoutMs,
    options.process,
    () => done,
  );
  if (done || !state.drained) return arrived;
  // Everything is resolved in the database: the last messages may still be on the wire.
  const late = await Promise.race([
    arrived,
    new Promise<undefined>((r) => setTimeout(() => r(undefined), 5_000)),
  ]);
  if (late?.reached === true) return late;
  const { sent, failed } = state.counts;
  throw new Error(
    `only ${sink.count()} of ${target} messages reached the sink; Herald counts ${sent} sent and ${failed} failed${state.error === undefined ? '' : ` (error_message: ${state.error})`}`,
  );
}
