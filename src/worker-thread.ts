import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Starts a worker thread from a module beside the caller, also when Herald runs from its TypeScript
 * source (tests, `npm run dev`): then the thread registers tsx before it imports the `.ts` file.
 * `base` is the caller's `import.meta.url`, `name` the module's name without its extension.
 */
export function startWorkerThread(base: string, name: string): Worker {
  if (!base.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, base));
  const tsx = createRequire(base)
    .resolve('tsx/package.json')
    .replace(/package\.json$/, 'dist/esm/api/index.mjs');
  const entry = new URL(`./${name}.ts`, base).href;
  return new Worker(
    `import(${JSON.stringify(pathToFileURL(tsx).href)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`,
    { eval: true },
  );
}

/** What waits for a thread's answer. */
export interface Waiter<T> {
  readonly resolve: (result: T) => void;
  readonly reject: (error: Error) => void;
}

/** A thread of a pool, and the job it is on (null when it is idle). */
export interface PoolThread<J extends Waiter<never>> {
  readonly worker: Worker;
  job: J | null;
}

/** Takes a thread that failed out of its pool; the job it was on fails with it. */
export function dropThread<J extends Waiter<never>>(
  threads: PoolThread<J>[],
  thread: PoolThread<J>,
  error: Error,
): void {
  const index = threads.indexOf(thread);
  if (index !== -1) threads.splice(index, 1);
  thread.job?.reject(error);
  thread.job = null;
}

/** Bytes to post to a thread: moved without a copy when the buffer is theirs alone, else copied. */
export function transferable(bytes: Buffer): Uint8Array {
  const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return own ? new Uint8Array(bytes.buffer) : new Uint8Array(bytes);
}

/**
 * Starts one thread of a pool (`startWorkerThread`): `onMessage` gets its answers, `onFail` the
 * error it fails with or the exit that ends it, `work` naming it there. An idle thread must not
 * keep a stopping process alive, so it does not.
 */
export function startPoolThread<M>(
  base: string,
  name: string,
  work: string,
  onMessage: (message: M) => void,
  onFail: (error: Error) => void,
): Worker {
  const worker = startWorkerThread(base, name);
  worker.unref();
  worker.on('message', onMessage);
  worker.on('error', onFail);
  worker.on('exit', (code) => onFail(new Error(`the ${work} thread exited (${code})`)));
  return worker;
}
