import { dropThread, startPoolThread, transferable, type PoolThread, type Waiter } from '../worker-thread.js';
import { checkBodyBytes, type BodyRequest, type BodyResult } from './check-body.js';

/**
 * Where request bodies are parsed and checked. JSON.parse holds the event loop for as long as it
 * runs, and how long depends on the body's shape, not only its size: 5 MiB of empty arrays or of
 * objects nested thousands deep takes the better part of a second, during which no other request
 * of any project is answered. So a body larger than `inlineMaxBytes` (a few milliseconds of parsing
 * at worst) is parsed and checked in a worker thread, and only the small result comes back: the
 * error, or the sends with their data already as JSON and their files' bytes decoded.
 *
 * Two lanes of threads: bodies up to `largeFrom` bytes (a single send without files), and larger
 * ones (batches, sends with files, up to 15 MiB), so a flood of large bodies never stands between
 * a small body and a thread. In each lane the threads take waiting bodies round-robin by project,
 * so one project's flood delays another project's body by one body's check, not by the whole
 * flood. Each waiting body is a request in flight on a connection of its own (capped per client,
 * client-limits.ts); the wait is bounded besides (`maxQueued`, `maxQueuedPerKey`, per lane): past
 * it the request is refused as busy (503 with Retry-After).
 */
export interface LaneOptions {
  readonly threads: number;
  readonly maxQueued: number;
  readonly maxQueuedPerKey: number;
}

export interface BodyCheckerOptions {
  readonly inlineMaxBytes: number;
  /** Bodies larger than this go to the large lane. */
  readonly largeFrom: number;
  readonly small: LaneOptions;
  readonly large: LaneOptions;
}

export const DEFAULT_BODY_CHECKER: BodyCheckerOptions = {
  inlineMaxBytes: 8 * 1024,
  largeFrom: 256 * 1024,
  small: { threads: 2, maxQueued: 512, maxQueuedPerKey: 128 },
  // The bytes of large bodies in flight are bounded before they are read (large-bodies.ts); one
  // thread, so that parsing them leaves the event loop a core of the two it may have.
  large: { threads: 1, maxQueued: 256, maxQueuedPerKey: 128 },
};

/** Too many large bodies are waiting to be checked: the request may be retried shortly. */
export class BodyCheckerBusy extends Error {
  override name = 'BodyCheckerBusy';
}

interface Pending extends Waiter<BodyResult> {
  readonly job: BodyRequest;
  readonly bytes: Uint8Array;
}

/** Routes each body: checked inline when small, else to the lane of its size. */
export class BodyChecker {
  private readonly small: Lane;
  private readonly large: Lane;

  constructor(private readonly options: BodyCheckerOptions = DEFAULT_BODY_CHECKER) {
    this.small = new Lane(options.small);
    this.large = new Lane(options.large);
  }

  /** Bodies waiting for a thread (metrics, tests). */
  get backlog(): number {
    return this.small.backlog + this.large.backlog;
  }

  /**
   * Checks a body; `key` names whose it is (fairness between projects). Throws BodyCheckerBusy when
   * too many bodies wait already in its lane, in all or for this key.
   */
  check(job: BodyRequest, bytes: Buffer, key: string): Promise<BodyResult> {
    if (bytes.length <= this.options.inlineMaxBytes) return Promise.resolve(checkBodyBytes(job, bytes));
    return (bytes.length > this.options.largeFrom ? this.large : this.small).check(job, bytes, key);
  }

  async close(): Promise<void> {
    await Promise.all([this.small.close(), this.large.close()]);
  }
}

/** Threads that take waiting bodies round-robin by key. */
class Lane {
  private readonly threads: PoolThread<Pending>[] = [];
  /** Waiting bodies per key (a project), keys in the order they are served. */
  private readonly waiting = new Map<string, Pending[]>();
  private queued = 0;
  private nextId = 0;
  private closed = false;

  constructor(private readonly options: LaneOptions) {}

  get backlog(): number {
    return this.queued;
  }

  check(job: BodyRequest, bytes: Buffer, key: string): Promise<BodyResult> {
    const mine = this.waiting.get(key) ?? [];
    if (this.closed || this.queued >= this.options.maxQueued || mine.length >= this.options.maxQueuedPerKey)
      return Promise.reject(new BodyCheckerBusy('too many large request bodies are waiting to be checked'));
    return new Promise((resolve, reject) => {
      mine.push({ job, bytes: transferable(bytes), resolve, reject });
      this.waiting.delete(key);
      this.waiting.set(key, mine);
      this.queued++;
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const list of this.waiting.values())
      for (const pending of list) pending.reject(new BodyCheckerBusy('the server is stopping'));
    this.waiting.clear();
    this.queued = 0;
    await Promise.all(this.threads.splice(0).map((thread) => thread.worker.terminate()));
  }

  /** Gives each idle thread the next waiting body, taking keys in turn. */
  private dispatch(): void {
    while (this.queued > 0) {
      const thread = this.idleThread();
      if (thread === null) return;
      const [key, list] = this.waiting.entries().next().value as [string, Pending[]];
      const pending = list.shift()!;
      this.queued--;
      // The key goes to the back of the turn, with what it still has waiting.
      this.waiting.delete(key);
      if (list.length > 0) this.waiting.set(key, list);
      thread.job = pending;
      const id = this.nextId++;
      thread.worker.postMessage({ id, job: { ...pending.job, bytes: pending.bytes } }, [
        pending.bytes.buffer as ArrayBuffer,
      ]);
    }
  }

  private idleThread(): PoolThread<Pending> | null {
    const idle = this.threads.find((thread) => thread.job === null);
    if (idle !== undefined) return idle;
    if (this.threads.length >= this.options.threads) return null;
    const answered = (message: { result?: BodyResult; error?: string }) => {
      const pending = thread.job;
      thread.job = null;
      if (message.result !== undefined) pending?.resolve(message.result);
      else pending?.reject(new Error(`checking a request body failed: ${message.error}`));
      this.dispatch();
    };
    const fail = (error: Error) => {
      dropThread(this.threads, thread, error);
      if (!this.closed) this.dispatch();
    };
    const thread: PoolThread<Pending> = {
      worker: startPoolThread(import.meta.url, 'body-worker', 'body checking', answered, fail),
      job: null,
    };
    this.threads.push(thread);
    return thread;
  }
}
