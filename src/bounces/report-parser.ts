import { dropThread, startPoolThread, transferable, type PoolThread, type Waiter } from '../worker-thread.js';
import type { ReadReport } from './report.js';

/**
 * Where reports are parsed. Reports arrive from strangers (anyone can send mail to a bounce
 * address), and mailparser holds the event loop for as long as it runs: a 1 MiB report of 50,000
 * address groups or 60,000 RFC 2231 parameters takes the better part of a second. So every report
 * is parsed and read in a worker thread, and only the small result comes back; the process's own
 * event loop (SMTP sessions, the IMAP connection, and in role all the delivery of every project's
 * mail) never waits for a parse.
 *
 * The wait is bounded: at most `maxWaiting` reports wait for the thread, and past that `read`
 * refuses at once (the listener answers 451 4.3.2, so the sender tries again later); the IMAP
 * intake waits for `room()` instead, since its messages stay in the mailbox. A parse that runs
 * past `deadlineMs` ends its thread and reads as nothing (a fresh thread takes the next report).
 */
export interface ReportParserOptions {
  readonly threads: number;
  readonly maxWaiting: number;
  readonly deadlineMs: number;
}

export const DEFAULT_REPORT_PARSER: ReportParserOptions = { threads: 1, maxWaiting: 16, deadlineMs: 30_000 };

/** Too many reports wait to be parsed: try again later. */
export class ReportParserBusy extends Error {
  override name = 'ReportParserBusy';
}

interface Job extends Waiter<ReadReport> {
  readonly bytes: Uint8Array;
}

interface Thread extends PoolThread<Job> {
  timer: NodeJS.Timeout | null;
}

const UNREADABLE: ReadReport = { report: { kind: 'unknown' }, deliveredTo: [] };

export class ReportParser {
  private readonly threads: Thread[] = [];
  private readonly waiting: Job[] = [];
  private readonly roomWaiters: (() => void)[] = [];
  private closed = false;
  /** Reports read by a thread (tests, metrics); none is ever read on the event loop. */
  parsed = 0;
  /** Reports refused because `maxWaiting` were waiting already. */
  refused = 0;
  /** Called when a report is refused (a metric). */
  onRefused: (() => void) | null = null;

  constructor(private readonly options: ReportParserOptions = DEFAULT_REPORT_PARSER) {}

  /** Reports waiting for a thread. */
  get backlog(): number {
    return this.waiting.length;
  }

  /** Resolves once a report can be read without being refused. */
  room(): Promise<void> {
    if (this.closed || this.waiting.length < this.options.maxWaiting) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** The report and where it was delivered; ReportParserBusy when too many wait already. */
  read(bytes: Buffer): Promise<ReadReport> {
    if (this.closed) return Promise.reject(new ReportParserBusy('the server is stopping'));
    if (this.waiting.length >= this.options.maxWaiting) {
      this.refused++;
      this.onRefused?.();
      return Promise.reject(new ReportParserBusy('too many reports are waiting to be read'));
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ bytes: transferable(bytes), resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.reject(new ReportParserBusy('the server is stopping'));
    for (const wake of this.roomWaiters.splice(0)) wake();
    await Promise.all(this.threads.splice(0).map((thread) => this.end(thread)));
  }

  private dispatch(): void {
    while (this.waiting.length > 0) {
      const thread = this.idleThread();
      if (thread === null) return;
      const job = this.waiting.shift()!;
      this.roomWaiters.shift()?.();
      thread.job = job;
      thread.timer = setTimeout(() => this.expire(thread), this.options.deadlineMs);
      thread.worker.postMessage({ id: 0, bytes: job.bytes }, [job.bytes.buffer as ArrayBuffer]);
    }
  }

  /** A parse past its deadline: the report reads as nothing, and its thread is replaced. */
  private expire(thread: Thread): void {
    const job = thread.job;
    thread.job = null;
    this.forget(thread);
    void this.end(thread);
    job?.resolve(UNREADABLE);
    this.dispatch();
  }

  private end(thread: Thread): Promise<number> {
    if (thread.timer !== null) clearTimeout(thread.timer);
    return thread.worker.terminate();
  }

  private forget(thread: Thread): void {
    const index = this.threads.indexOf(thread);
    if (index !== -1) this.threads.splice(index, 1);
  }

  private idleThread(): Thread | null {
    const idle = this.threads.find((thread) => thread.job === null);
    if (idle !== undefined) return idle;
    if (this.closed || this.threads.length >= this.options.threads) return null;
    const answered = (message: { result?: ReadReport; error?: string }) => {
      const job = thread.job;
      if (thread.timer !== null) clearTimeout(thread.timer);
      thread.job = null;
      thread.timer = null;
      this.parsed++;
      job?.resolve(message.result ?? UNREADABLE);
      this.dispatch();
    };
    const fail = (error: Error) => {
      if (thread.timer !== null) clearTimeout(thread.timer);
      dropThread(this.threads, thread, error);
      if (!this.closed) this.dispatch();
    };
    const thread: Thread = {
      worker: startPoolThread(import.meta.url, 'report-worker', 'report reading', answered, fail),
      job: null,
      timer: null,
    };
    this.threads.push(thread);
    return thread;
  }
}
