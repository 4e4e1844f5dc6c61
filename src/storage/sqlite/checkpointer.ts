import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { sqliteDriverPath } from './driver.js';

/**
 * Checkpoints the WAL from a worker thread with a connection of its own.
 *
 * SQLite's automatic checkpoint runs inside whichever commit crosses the threshold: it copies the
 * WAL into the database file and syncs it, on the event loop, in the middle of answering requests.
 * A PASSIVE checkpoint never blocks writers, so running it here every second moves that I/O off
 * the request path; each commit then only appends to (and syncs) a WAL that SQLite restarts from
 * its beginning once it has been checkpointed. Durability is unchanged: commits still sync the WAL.
 * The main connection keeps a high automatic threshold as a safety net should this thread stop.
 */

// CommonJS, evaluated in the worker: better-sqlite3 is resolved by the parent and passed in.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ frames: result.log, checkpointed: result.checkpointed });
  } catch (error) {
    parentPort.postMessage({ error: String((error && error.message) || error) });
  }
}, workerData.intervalMs);
parentPort.on('message', (message) => {
  if (message && message.truncate !== undefined) {
    try {
      const [result] = db.pragma('wal_checkpoint(TRUNCATE)');
      parentPort.postMessage({ truncated: message.truncate, busy: result.busy === 1 });
    } catch (error) {
      parentPort.postMessage({ truncated: message.truncate, error: String((error && error.message) || error) });
    }
    return;
  }
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export interface CheckpointReport {
  readonly frames?: number;
  readonly checkpointed?: number;
  readonly error?: string;
}

export interface Checkpointer {
  /**
   * Checkpoints the whole WAL into the database file and truncates the WAL to nothing, waiting up
   * to the thread's busy timeout for readers and a writer to let it. Resolves true once done,
   * false when they did not (the WAL keeps its frames until the next try).
   */
  truncate(): Promise<boolean>;
  stop(): Promise<void>;
}

interface TruncateReply {
  readonly truncated: number;
  readonly busy?: boolean;
  readonly error?: string;
}

export function startCheckpointer(
  file: string,
  options: { intervalMs?: number; onReport?: (report: CheckpointReport) => void } = {},
): Checkpointer {
  const driver = sqliteDriverPath;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { file, driver, intervalMs: options.intervalMs ?? 1000 },
  });
  // The thread must not keep the process alive, and its failure must not end it: the main
  // connection's automatic checkpoint still bounds the WAL.
  worker.unref();
  const truncations = new Map<number, (reply: TruncateReply) => void>();
  let nextTruncation = 0;
  worker.on('error', (error) => {
    options.onReport?.({ error: error.message });
    for (const settle of truncations.values()) settle({ truncated: -1, error: error.message });
    truncations.clear();
  });
  worker.on('message', (message: CheckpointReport | TruncateReply) => {
    if ('truncated' in message) {
      truncations.get(message.truncated)?.(message);
      truncations.delete(message.truncated);
    } else options.onReport?.(message);
  });
  const exited = once(worker, 'exit');
  return {
    async truncate() {
      const id = nextTruncation++;
      const reply = await new Promise<TruncateReply>((resolve) => {
        truncations.set(id, resolve);
        worker.postMessage({ truncate: id });
      });
      if (reply.error !== undefined) throw new Error(`WAL checkpoint failed: ${reply.error}`);
      return reply.busy !== true;
    },
    async stop() {
      // Waiting for the thread must keep the process alive, or an otherwise idle process would
      // end with this promise unsettled (exit status 13, nothing printed).
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}
