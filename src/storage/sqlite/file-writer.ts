import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { FILE_CHUNK_BYTES } from '../notification-files.js';

/**
 * Writes files' bytes (a send's attachments, up to 10 MiB each) into the SQLite file from a worker
 * thread with a connection of its own, a chunk of 1 MiB per transaction.
 *
 * better-sqlite3 runs every statement on the calling thread: 10 MiB written and synced to disk
 * from the event loop would stop the whole API for as long as the disk takes (30 to 400 ms each
 * here), during which no other project's request is read or answered. From this thread only the
 * write lock is shared, and for one chunk at a time: the main connection's writers wait for it
 * without stopping the event loop (lock-wait.ts), and `stageFile` lets them go between chunks.
 * Every chunk commits with `synchronous=FULL`, its own sync in this thread: a chunk committed
 * without one would leave its megabyte for the next commit's sync of the WAL, often the main
 * connection's, on the event loop (measured: 130 to 180 ms per small commit during a flood, against
 * a few ms). So the file is durable before the accept that links it commits. The rows are those
 * `insertFileContent` (notification-files.ts) writes on PostgreSQL.
 */

// CommonJS, evaluated in the worker: better-sqlite3 is resolved by the parent and passed in.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const CHUNK = workerData.chunkBytes;
const files = new Map();
let db = null;
let addFile, addChunk;
function open() {
  db = new Database(workerData.file);
  // Waiting here, for another process's writer, stops only this thread.
  db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
  db.pragma('synchronous = FULL');
  addFile = db.prepare('INSERT INTO file_contents (size, created_at) VALUES (?, ?)');
  addChunk = db.prepare('INSERT INTO file_chunks (content_id, seq, bytes) VALUES (?, ?, ?)');
}
parentPort.on('message', (message) => {
  if (message === 'stop') {
    if (db !== null) db.close();
    parentPort.close();
    return;
  }
  if (message.bytes !== undefined) {
    files.set(message.id, { bytes: message.bytes, now: message.now, contentId: null });
    return;
  }
  const file = files.get(message.id);
  try {
    if (db === null) open();
    const { bytes } = file;
    const start = message.seq * CHUNK;
    const last = start + CHUNK >= bytes.byteLength;
    db.transaction(() => {
      if (file.contentId === null) file.contentId = Number(addFile.run(bytes.byteLength, file.now).lastInsertRowid);
      const end = Math.min(start + CHUNK, bytes.byteLength);
      addChunk.run(file.contentId, message.seq, Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start));
    }).immediate();
    if (last) files.delete(message.id);
    parentPort.postMessage({ id: message.id, contentId: file.contentId, last });
  } catch (error) {
    files.delete(message.id);
    parentPort.postMessage({ id: message.id, error: String((error && error.message) || error), code: error && error.code });
  }
});
`;

export interface FileWriter {
  /**
   * Writes the bytes (their buffer moves to the thread: the caller must not use it again), a
   * chunk at a time, each chunk inside `turn` (which holds the main connection meanwhile); returns
   * the file's id.
   */
  write(bytes: Uint8Array, now: number, turn: <T>(write: () => Promise<T>) => Promise<T>): Promise<number>;
  stop(): Promise<void>;
}

interface Reply {
  readonly id: number;
  readonly contentId?: number;
  readonly last?: boolean;
  readonly error?: string;
  readonly code?: string;
}

/** A thread started at the first write, so a CLI command that writes no file starts none. */
export function fileWriter(file: string, busyTimeoutMs: number): FileWriter {
  let worker: Worker | null = null;
  let exited: Promise<unknown> | null = null;
  const waiting = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  let next = 0;
  const fail = (error: Error) => {
    for (const { reject } of waiting.values()) reject(error);
    waiting.clear();
    worker = null;
  };
  const start = (): Worker => {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const started = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { file, driver, busyTimeoutMs, chunkBytes: FILE_CHUNK_BYTES },
    });
    // An idle thread must not keep a stopping process alive.
    started.unref();
    started.on('message', (reply: Reply) => {
      const pending = waiting.get(reply.id);
      waiting.delete(reply.id);
      if (reply.error === undefined) pending?.resolve(reply);
      else
        pending?.reject(
          Object.assign(new Error(`writing a file failed: ${reply.error}`), { code: reply.code }),
        );
    });
    started.on('error', fail);
    exited = once(started, 'exit').then(() => fail(new Error('the file writing thread exited')));
    return started;
  };
  const chunk = (thread: Worker, id: number, seq: number) =>
    new Promise<Reply>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      thread.postMessage({ id, seq });
    });
  return {
    async write(bytes, now, turn) {
      const thread = (worker ??= start());
      const id = next++;
      const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
      const moved = own ? bytes : new Uint8Array(bytes);
      thread.postMessage({ id, bytes: moved, now }, [moved.buffer as ArrayBuffer]);
      for (let seq = 0; ; seq++) {
        const reply = await turn(() => chunk(thread, id, seq));
        if (reply.last) return reply.contentId!;
      }
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
