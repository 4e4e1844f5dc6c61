import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../src/storage/group-commit.js';

/** A commit function that records each batch it is given and lets the test decide when it ends. */
function recorder<T>() {
  const batches: T[][] = [];
  const gates: { release: () => void; fail: (error: Error) => void }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const commit = (items: readonly T[]) => {
    batches.push([...items]);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    return new Promise<string[]>((resolve, reject) => {
      gates.push({
        release: () => {
          inFlight--;
          resolve(items.map((item) => `stored ${String(item)}`));
        },
        fail: (error) => {
          inFlight--;
          reject(error);
        },
      });
    });
  };
  return { batches, gates, commit, maxInFlight: () => maxInFlight };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('GroupCommit', () => {
  it('writes what arrives in one event-loop turn as one batch and answers each item with its own result', async () => {
    const r = recorder<number>();
    const group = new GroupCommit(r.commit);
    const answers = [1, 2, 3].map((n) => group.submit(n));
    await turn();
    expect(r.batches).toEqual([[1, 2, 3]]);
    r.gates[0]!.release();
    expect(await Promise.all(answers)).toEqual(['stored 1', 'stored 2', 'stored 3']);
  });

  it('gathers items that arrive while a batch is being written into the next batch', async () => {
    const r = recorder<string>();
    const group = new GroupCommit(r.commit);
    const first = group.submit('a');
    await turn();
    const later = ['b', 'c'].map((item) => group.submit(item));
    await turn();
    // One writer: the second batch waits for the first to finish.
    expect(r.batches).toEqual([['a']]);
    r.gates[0]!.release();
    await first;
    await turn();
    expect(r.batches).toEqual([['a'], ['b', 'c']]);
    r.gates[1]!.release();
    expect(await Promise.all(later)).toEqual(['stored b', 'stored c']);
  });

  it('splits a burst into batches of at most maxBatch', async () => {
    const r = recorder<number>();
    const group = new GroupCommit(r.commit, { maxBatch: 2, concurrency: 3 });
    const answers = [1, 2, 3, 4, 5].map((n) => group.submit(n));
    await turn();
    expect(r.batches).toEqual([[1, 2], [3, 4], [5]]);
    for (const gate of r.gates) gate.release();
    expect(await Promise.all(answers)).toHaveLength(5);
  });

  it("takes the items of each key in turn, so one key's burst does not hold another key's item back", async () => {
    const r = recorder<string>();
    const group = new GroupCommit(r.commit, { maxBatch: 1, keyOf: (item) => item[0]! });
    const answers = ['a1', 'a2', 'a3', 'a4', 'b1', 'a5', 'c1', 'b2'].map((item) => group.submit(item));
    for (let i = 0; i < 8; i++) {
      while (r.gates.length <= i) await turn();
      r.gates[i]!.release();
    }
    await Promise.all(answers);
    // a1 was taken first; then each key in turn, the key served last going to the back.
    expect(r.batches.flat()).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4', 'a5']);
  });

  it('gathers a batch from every key in turn, up to maxBatch', async () => {
    const r = recorder<string>();
    const group = new GroupCommit(r.commit, { maxBatch: 4, keyOf: (item) => item[0]! });
    const answers = ['a1', 'a2', 'a3', 'b1', 'b2', 'c1'].map((item) => group.submit(item));
    await turn();
    expect(r.batches).toEqual([['a1', 'b1', 'c1', 'a2']]);
    r.gates[0]!.release();
    await turn();
    await turn();
    expect(r.batches[1]).toEqual(['b2', 'a3']);
    r.gates[1]!.release();
    expect(await Promise.all(answers)).toHaveLength(6);
  });

  it('fills the rest of a batch from the one key left, in its order, and leaves the rest for the next', async () => {
    const r = recorder<string>();
    const group = new GroupCommit(r.commit, { maxBatch: 5, keyOf: (item) => item[0]! });
    const answers = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'b1'].map((item) => group.submit(item));
    await turn();
    expect(r.batches).toEqual([['a1', 'b1', 'a2', 'a3', 'a4']]);
    r.gates[0]!.release();
    await turn();
    await turn();
    expect(r.batches[1]).toEqual(['a5', 'a6']);
    r.gates[1]!.release();
    expect(await Promise.all(answers)).toEqual(
      ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'b1'].map((i) => `stored ${i}`),
    );
  });
  it('keeps at most `concurrency` batches in flight', async () => {
    const r = recorder<number>();
    const group = new GroupCommit(r.commit, { maxBatch: 1, concurrency: 2 });
    const answers = [1, 2, 3, 4].map((n) => group.submit(n));
    await turn();
    expect(r.batches).toHaveLength(2);
    r.gates[0]!.release();
    await answers[0];
    await turn();
    expect(r.batches).toHaveLength(3);
    for (const gate of r.gates.slice(1)) gate.release();
    await turn();
    for (const gate of r.gates.slice(3)) gate.release();
    await Promise.all(answers);
    expect(r.maxInFlight()).toBe(2);
  });

  it('answers a bad item alone: a failed batch is committed again item by item', async () => {
    const batches: string[][] = [];
    // A transaction fails as a whole when any item in it is bad, like a row the store refuses.
    const group = new GroupCommit(async (items: readonly string[]) => {
      batches.push([...items]);
      if (items.includes('poison')) throw new Error('refused');
      return items.map((item) => `stored ${item}`);
    });
    const answers = ['a', 'poison', 'b'].map((item) => group.submit(item));
    await expect(answers[1]).rejects.toThrow('refused');
    expect(await answers[0]).toBe('stored a');
    expect(await answers[2]).toBe('stored b');
    expect(batches).toEqual([['a', 'poison', 'b'], ['a'], ['poison'], ['b']]);
  });

  it('refuses a whole batch at once when the store itself failed, and goes on with the next', async () => {
    const batches: string[][] = [];
    let locked = true;
    const lockTimeout = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    const group = new GroupCommit(
      async (items: readonly string[]) => {
        batches.push([...items]);
        if (locked) throw lockTimeout;
        return items.map((item) => `stored ${item}`);
      },
      { storeFailure: (error) => error === lockTimeout },
    );
    const answers = ['a', 'b', 'c'].map((item) => group.submit(item));
    for (const answer of answers) await expect(answer).rejects.toBe(lockTimeout);
    // No item was tried alone: each would only have waited for the lock again.
    expect(batches).toEqual([['a', 'b', 'c']]);
    locked = false;
    expect(await group.submit('d')).toBe('stored d');
  });

  it('refuses the items of a failed batch that fail alone too, and goes on with the next batch', async () => {
    let failing = true;
    const group = new GroupCommit(async (items: readonly number[]) => {
      if (failing) throw new Error('disk full');
      return items.map((n) => n * 2);
    });
    const failed = [1, 2].map((n) => group.submit(n));
    for (const answer of failed) await expect(answer).rejects.toThrow('disk full');
    failing = false;
    expect(await group.submit(3)).toBe(6);
  });

  it('flush resolves only after everything submitted so far is answered', async () => {
    const r = recorder<number>();
    const group = new GroupCommit(r.commit, { maxDelayMs: 5 });
    const answer = group.submit(1);
    let flushed = false;
    const flushing = group.flush().then(() => (flushed = true));
    // The batch waits up to maxDelayMs for company before it is written.
    while (r.gates.length === 0) await turn();
    expect(flushed).toBe(false);
    r.gates[0]!.release();
    await flushing;
    expect(flushed).toBe(true);
    expect(await answer).toBe('stored 1');
  });
});
