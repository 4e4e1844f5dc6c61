import { describe, expect, it } from 'vitest';
import { FileQueue } from '../../src/services/file-queue.js';
import { FILE_CHUNK_BYTES, type FileChunk } from '../../src/storage/notification-files.js';

/**
 * The queue of files written before their sends are accepted: a megabyte per transaction, keys
 * (projects) in turn, small files sharing a transaction, a file's chunks in order under the id its
 * first chunk got.
 */

const MiB = FILE_CHUNK_BYTES;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A store that records each transaction and lets the test end it. */
function store() {
  const writes: { chunks: FileChunk[]; finish: () => void; fail: (error: Error) => void }[] = [];
  let nextId = 1;
  const write = (chunks: readonly FileChunk[]) =>
    new Promise<number[]>((resolve, reject) => {
      const ids = chunks.map((chunk) => chunk.contentId ?? nextId++);
      writes.push({ chunks: [...chunks], finish: () => resolve(ids), fail: reject });
    });
  /** Each transaction as `<first byte of each chunk's file>:<seq>`. */
  const labels = () =>
    writes.map((w) => w.chunks.map((c) => `${String.fromCharCode(c.bytes[0] ?? 63)}${c.seq}`));
  return { writes, write, labels };
}

const file = (letter: string, bytes: number) => new Uint8Array(bytes).fill(letter.charCodeAt(0));

async function drain(s: ReturnType<typeof store>): Promise<void> {
  for (let i = 0; i < s.writes.length; i++) {
    s.writes[i]!.finish();
    await turn();
    await turn();
  }
}

describe('FileQueue', () => {
  it("writes a megabyte per transaction and takes projects in turn, so one project's flood does not hold another's file back", async () => {
    const s = store();
    const queue = new FileQueue(s.write, { concurrency: 1 });
    const a = queue.submit('A', [file('a', 3 * MiB), file('b', 2 * MiB)], 1);
    await turn();
    const b = queue.submit('B', [file('c', 1000)], 2);
    await drain(s);
    expect(await b).toEqual([2]);
    expect(await a).toEqual([1, 3]);
    // A's first chunk was already being written; B's file is next, not after A's five megabytes.
    expect(s.labels()).toEqual([['a0'], ['c0'], ['a1'], ['a2'], ['b0'], ['b1']]);
    // A file's later chunks carry the id its first chunk got.
    expect(s.writes.map((w) => w.chunks.map((c) => c.contentId))).toEqual([
      [null],
      [null],
      [1],
      [1],
      [null],
      [3],
    ]);
    expect(s.writes[1]!.chunks[0]!.size).toBe(1000);
  });

  it('writes the small files of many sends in one transaction, within a megabyte', async () => {
    const s = store();
    const queue = new FileQueue(s.write, { concurrency: 1 });
    const sends = [queue.submit('X', [file('x', MiB)], 1)];
    await turn();
    sends.push(
      queue.submit('A', [file('a', 100_000), file('b', 100_000)], 1),
      queue.submit('B', [file('c', 200_000)], 1),
      queue.submit('C', [file('d', MiB + 10)], 1),
    );
    await drain(s);
    await Promise.all(sends);
    // While x was written the others waited; then a, c and b fit in one transaction (A's turn comes
    // round again), and d's first megabyte would not: it goes alone, then its last ten bytes.
    expect(s.labels()).toEqual([['x0'], ['a0', 'c0', 'b0'], ['d0'], ['d1']]);
  });

  it('refuses a send whose write failed, once, and goes on with the others', async () => {
    const s = store();
    const queue = new FileQueue(s.write, { concurrency: 1 });
    const a = queue.submit('A', [file('a', 2 * MiB), file('b', 10)], 1);
    const b = queue.submit('B', [file('c', 10)], 1);
    await turn();
    s.writes[0]!.fail(new Error('disk full'));
    await expect(a).rejects.toThrow('disk full');
    await drain(s);
    expect(await b).toEqual([2]);
    // Nothing more of A's files was written after its failure.
    expect(
      s
        .labels()
        .flat()
        .filter((label) => label.startsWith('a') || label.startsWith('b')),
    ).toEqual(['a0']);
  });

  it('writes an empty file as one empty chunk, and flush waits for every write', async () => {
    const s = store();
    const queue = new FileQueue(s.write, { concurrency: 2 });
    const sent = queue.submit('A', [new Uint8Array(0)], 1);
    let flushed = false;
    const flushing = queue.flush().then(() => (flushed = true));
    await turn();
    expect(flushed).toBe(false);
    expect(s.writes[0]!.chunks).toEqual([{ contentId: null, size: 0, seq: 0, bytes: new Uint8Array(0) }]);
    s.writes[0]!.finish();
    expect(await sent).toEqual([1]);
    await flushing;
    expect(flushed).toBe(true);
    expect(await queue.submit('A', [], 1)).toEqual([]);
  });
});
