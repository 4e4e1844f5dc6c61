import { parentPort } from 'node:worker_threads';
import { readIncoming } from './report.js';

/** The worker thread of report-parser.ts: reads one report at a time, answers with what it says. */
parentPort?.on('message', ({ id, bytes }: { id: number; bytes: Uint8Array }) => {
  readIncoming(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).then(
    (result) => parentPort?.postMessage({ id, result }),
    (error: unknown) =>
      parentPort?.postMessage({ id, error: error instanceof Error ? error.message : String(error) }),
  );
});
