/**
 * Which workers are dead, judged from their heartbeats. Every worker writes its heartbeat to the
 * store every HEARTBEAT_MS; a worker whose heartbeat has not moved for STALE_AFTER_MS is dead, and
 * the messages it was sending go back to the queue at once instead of after their lease
 * (product.md §8: in-flight mail is retried within 10 s of a kill -9 and restart).
 *
 * The judgement uses only the observer's own clock: a heartbeat counts as moved when its stored
 * value differs from the one seen before. Comparing another machine's timestamp with this
 * machine's clock would turn a few seconds of clock skew into false deaths and duplicate mail.
 */

export const HEARTBEAT_MS = 1_000;
/** Several missed beats: one slow database round trip or GC pause must not look like death. */
export const STALE_AFTER_MS = 5_000;

export interface WorkerBeat {
  readonly owner: string;
  readonly beat: number;
}

export class LivenessJudge {
  /** For each owner: the last value seen and when (this clock) it last changed. */
  private readonly seen = new Map<string, { beat: number; changedAt: number }>();

  constructor(private readonly staleAfterMs: number = STALE_AFTER_MS) {}

  /** Takes the current heartbeats; returns the owners (with the beat seen) now judged dead. */
  observe(heartbeats: readonly WorkerBeat[], now: number): WorkerBeat[] {
    const dead: WorkerBeat[] = [];
    const present = new Set<string>();
    for (const { owner, beat } of heartbeats) {
      present.add(owner);
      const before = this.seen.get(owner);
      if (before === undefined || before.beat !== beat) {
        this.seen.set(owner, { beat, changedAt: now });
      } else if (now - before.changedAt >= this.staleAfterMs) {
        dead.push({ owner, beat });
      }
    }
    for (const owner of this.seen.keys()) if (!present.has(owner)) this.seen.delete(owner);
    return dead;
  }
}
