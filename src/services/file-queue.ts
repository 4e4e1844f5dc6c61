import { FILE_CHUNK_BYTES, type FileChunk } from '../storage/notification-files.js';

/**
 * Where sends' files are written before their sends are accepted (product.md §12: one project's
 * large sends never hold another project's small send back).
 *
 * Files are cut into chunks of 1 MiB, and written a transaction at a time (two on PostgreSQL) of
 * at most about 1 MiB: the chunks of every waiting project in turn, one chunk per file and
 * transaction, as many as fit. So a project's flood of 10 MiB sends holds another project's file
 * back by a megabyte, not by the flood; small files of many sends share one transaction and its
 * sync; and no transaction holds the store's writer for long, so the group commit, which every
 * project's small sends share and which only links the files, runs between them. A send is
 * answered once all its files are written.
 */

export type WriteChunks = (chunks: readonly FileChunk[], now: number) => Promise<number[]>;

interface Job {
  readonly now: number;
  remaining: number;
  failed: boolean;
  readonly ids: number[];
  readonly resolve: (ids: number[]) => void;
  readonly reject: (error: unknown) => void;
}

interface QueuedFile {
  readonly job: Job;
  /** Its place among the job's files. */
  readonly position: number;
  readonly content: Uint8Array;
  readonly chunks: number;
  /** The next chunk to write. */
  next: number;
  contentId: number | null;
  /** A chunk of it is being written: its next waits for the file id that write returns. */
  busy: boolean;
}

export class FileQueue {
  /** Files waiting per key (a project), in the order they came. */
  private readonly waiting = new Map<string, QueuedFile[]>();
  /** The key whose chunk was taken last: the next turn starts after it. */
  private lastServed: string | null = null;
  private active = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly write: WriteChunks,
    private readonly options: { readonly concurrency: number; readonly maxBytes?: number },
  ) {}

  /** Writes a send's files; resolves with their file ids in order once every chunk is written. */
  submit(key: string, contents: readonly Uint8Array[], now: number): Promise<number[]> {
    if (contents.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      const job: Job = { now, remaining: contents.length, failed: false, ids: [], resolve, reject };
      const files = contents.map((content, position): QueuedFile => ({
        job,
        position,
        content,
        chunks: Math.max(1, Math.ceil(content.byteLength / FILE_CHUNK_BYTES)),
        next: 0,
        contentId: null,
        busy: false,
      }));
      const list = this.waiting.get(key);
      if (list === undefined) this.waiting.set(key, files);
      else list.push(...files);
      this.pump();
    });
  }

  /** Resolves once every file submitted so far is written or refused (graceful stop). */
  flush(): Promise<void> {
    if (this.active === 0 && this.waiting.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Starts writes while there is room and something to write. */
  private pump(): void {
    while (this.active < this.options.concurrency) {
      const batch = this.nextBatch();
      if (batch.length === 0) break;
      this.active++;
      const chunks = batch.map((file): FileChunk => ({
        contentId: file.contentId,
        size: file.content.byteLength,
        seq: file.next,
        bytes: file.content.subarray(file.next * FILE_CHUNK_BYTES, (file.next + 1) * FILE_CHUNK_BYTES),
      }));
      // Chunks of one transaction carry one time: the oldest of their sends'.
      const now = Math.min(...batch.map((file) => file.job.now));
      this.write(chunks, now)
        .then(
          (ids) => batch.forEach((file, i) => this.written(file, ids[i]!)),
          (error: unknown) => batch.forEach((file) => this.fail(file.job, error)),
        )
        .finally(() => {
          this.active--;
          this.pump();
        });
    }
    if (this.active === 0 && this.waiting.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  /**
   * The next transaction's chunks: each key's first file that has a chunk to write and none being
   * written, keys in turn from the one after the key served last (so a key that just came goes
   * before one that was just served), until `maxBytes` (at least one chunk).
   */
  private nextBatch(): QueuedFile[] {
    const maxBytes = this.options.maxBytes ?? FILE_CHUNK_BYTES;
    const keys = [...this.waiting.keys()];
    const after = this.lastServed === null ? -1 : keys.indexOf(this.lastServed);
    const turn = [...keys.slice(after + 1), ...keys.slice(0, after + 1)];
    const batch: QueuedFile[] = [];
    let bytes = 0;
    for (let added = true; added;) {
      added = false;
      for (const key of turn) {
        const file = this.waiting.get(key)!.find((f) => !f.busy && !batch.includes(f));
        if (file === undefined) continue;
        const size = Math.min(FILE_CHUNK_BYTES, file.content.byteLength - file.next * FILE_CHUNK_BYTES);
        if (batch.length > 0 && bytes + size > maxBytes) continue;
        batch.push(file);
        bytes += size;
        added = true;
        this.lastServed = key;
      }
    }
    for (const file of batch) file.busy = true;
    return batch;
  }

  private written(file: QueuedFile, contentId: number): void {
    file.busy = false;
    file.contentId = contentId;
    file.next++;
    if (file.next < file.chunks) return;
    this.remove((f) => f === file);
    const { job } = file;
    job.ids[file.position] = contentId;
    if (--job.remaining === 0 && !job.failed) job.resolve(job.ids);
  }

  /** A write failed: every file of its sends leaves the queue, and each send is refused once. */
  private fail(job: Job, error: unknown): void {
    this.remove((f) => f.job === job);
    if (job.failed) return;
    job.failed = true;
    job.reject(error);
  }

  private remove(which: (file: QueuedFile) => boolean): void {
    for (const [key, files] of this.waiting) {
      const left = files.filter((file) => !which(file));
      if (left.length === 0) this.waiting.delete(key);
      else if (left.length !== files.length) this.waiting.set(key, left);
    }
  }
}
