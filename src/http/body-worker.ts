import { parentPort } from 'node:worker_threads';
import { checkBodyBytes, transferables, type BodyRequest } from './check-body.js';

/** The worker thread of body-checker.ts: checks one body at a time, answers with its result. */
parentPort?.on('message', ({ id, job }: { id: number; job: BodyRequest & { bytes: Uint8Array } }) => {
  try {
    const result = checkBodyBytes(job, job.bytes);
    // The files' decoded bytes move to the event loop's thread; nothing else is large.
    parentPort?.postMessage({ id, result }, transferables(result));
  } catch (error) {
    parentPort?.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
