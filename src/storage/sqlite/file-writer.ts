import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { FileChunk } from '../notification-files.js';
import { sqliteDriverPath } from './driver.js';

/**
 * Writes chunks of files (sends' attachments, up to 10 MiB each, a megabyte or so per call) into
 * the SQLite file from a worker thread with a connection of its own, one transaction per call.
 *
 * better-sqlite3 runs every statement on the calling thread: megabytes written and synced to
 * disk from the event loop would stop the whole API for as long as the disk takes (30 to 400 ms
 * per 10 MiB here), during which no other project's request is read or answered. From this thread
 * only the write lock is shared, for one call's chunks: the main connection's writers wait for it
 * without stopping the event loop (lock-wait.ts), and Storage.writeFileChunks lets them go between
 * calls. Every transaction commits with `synchronous=FULL`, its own sync in this thread: one
 * without would leave its megabyte for the next commit's sync of the WAL, often the main
 * connection's, on the event loop (measured: 130 to 180 ms per small commit during a flood,
 * against a few ms). The rows are those `insertFileChunks` (notification-files.ts) writes on
 * PostgreSQL.
 */

// CommonJS, evaluated in the worker: better-sqlite3 is resolved by the parent and passed in.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
let db = null;
let write = null;
function open() {
  db = new Database(workerData.file);
  // Waiting here, for another process's writer, stops only this thread.
  db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
  db.pragma('synchronous = FULL');
  const addFile = db.prepare('INSERT INTO file_contents (size, created_at) VALUES (?, ?)');
  const addChunk = db.prepare('INSERT INTO file_chunks (content_id, seq, bytes) VALUES (?, ?, ?)');
  write = db.transaction((chunks, now) =>
    chunks.map((chunk) => {
      const id = chunk.contentId === null ? Number(addFile.run(chunk.size, now).lastInsertRowid) : chunk.contentId;
      addChunk.run(id, chunk.seq, Buffer.from(chunk.bytes.buffer, chunk.bytes.byteOffset, chunk.bytes.byteLength));
      return id;
    }),
  );
}
parentPort.on('message', (message) => {
  if (message === 'stop') {
    if (db !== null) db.close();
    parentPort.close();
    return;
  }
  try {
    if (db === null) open();
    parentPort.postMessage({ id: message.id, ids: write.immediate(message.chunks, message.now) });
  } catch (error) {
    parentPort.postMessage({ id: message.id, error: String((error && error.message) || error), code: error && error.code });
  }
});
`;

export interface FileWriter {
  /** Writes the chunks in one transaction (their bytes are copied to the thread); returns their file ids. */
  write(chunks: readonly FileChunk[], now: number): Promise<number[]>;
  stop(): Promise<void>;
}

interface Reply {
  readonly id: number;
  readonly ids?: number[];
  readonly error?: string;
  readonly code?: string;
}

/** A thread started at the first write, so a CLI command that writes no file starts none. */
export function fileWriter(file: string, busyTimeoutMs: number): FileWriter {
  let worker: Worker | null = null;
  let exited: Promise<unknown> | null = null;
  const waiting = new Map<number, { resolve: (ids: number[]) => void; reject: (error: Error) => void }>();
  let next = 0;
  const fail = (error: Error) => {
    for (const { reject } of waiting.values()) reject(error);
    waiting.clear();
    worker = null;
  };
  const start = (): Worker => {
    const driver = sqliteDriverPath;
    const started = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, driver, busyTimeoutMs } });
    // An idle thread must not keep a stopping process alive.
    started.unref();
    started.on('message', (reply: Reply) => {
      const pending = waiting.get(reply.id);
      waiting.delete(reply.id);
      if (reply.ids !== undefined) pending?.resolve(reply.ids);
      else
        pending?.reject(
          Object.assign(new Error(`writing files failed: ${reply.error}`), { code: reply.code }),
        );
    });
    started.on('error', fail);
    exited = once(started, 'exit').then(() => fail(new Error('the file writing thread exited')));
    return started;
  };
  return {
    write(chunks, now) {
      const thread = (worker ??= start());
      const id = next++;
      // Each chunk is a view of its file's buffer: copied (a megabyte at most) into one of its
      // own, which moves to the thread.
      const moved = chunks.map((chunk) => ({ ...chunk, bytes: new Uint8Array(chunk.bytes) }));
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        thread.postMessage(
          { id, chunks: moved, now },
          moved.map((chunk) => chunk.bytes.buffer),
        );
      });
    },
    async stop() {
      const running = worker;
      if (running === null) return;
      running.ref();
      running.postMessage('stop');
      await exited;
    },
  };
}
