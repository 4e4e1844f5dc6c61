/**
 * Which workers are dead, judged from their heartbeats. Every worker writes its heartbeat to the
 * store every HEARTBEAT_MS; a worker whose heartbeat has not moved for STALE_AFTER_MS is dead, and
 * the messages it was sending go back to the queue at once instead of after their lease
 * (product.md §8: in-flight mail is retried within 10 s of a kill -9 and restart).
 *
 * The judgement uses only the observer's own clock: a heartbeat counts as moved when its stored
 * value differs from the one seen before. Comparing another machine's timestamp with this
 * machine's clock would turn a few seconds of clock skew into false deaths and duplicate mail.
 *
 * Time alone is not enough either. When the store stalls (a lock held for seconds, a slow disk)
 * no worker can beat, the observer included; the first look after the stall would find every peer
 * unchanged for as long as the stall lasted. So a peer is dead only when its heartbeat stayed put
 * for the stale time *and* through as many of the observer's own looks as fit in that time: the
 * observer got through to the store again and again, and the peer did not.
 */

export const HEARTBEAT_MS = 1_000;
/** Several missed beats: one slow database round trip or GC pause must not look like death. */
export const STALE_AFTER_MS = 5_000;

export interface WorkerBeat {
  readonly owner: string;
  readonly beat: number;
}

export class LivenessJudge {
  /** For each owner: the last value seen, when (this clock) it last changed, looks since then. */
  private readonly seen = new Map<string, { beat: number; changedAt: number; looks: number }>();

  constructor(
    private readonly staleAfterMs: number = STALE_AFTER_MS,
    /** The observer's own looks a heartbeat must stay put through: one per beat of the stale time. */
    private readonly staleLooks: number = Math.ceil(staleAfterMs / HEARTBEAT_MS),
  ) {}

  /** Takes the current heartbeats; returns the owners (with the beat seen) now judged dead. */
  observe(heartbeats: readonly WorkerBeat[], now: number): WorkerBeat[] {
    const dead: WorkerBeat[] = [];
    const present = new Set<string>();
    for (const { owner, beat } of heartbeats) {
      present.add(owner);
      const before = this.seen.get(owner);
      if (before === undefined || before.beat !== beat) {
        this.seen.set(owner, { beat, changedAt: now, looks: 0 });
        continue;
      }
      before.looks += 1;
      if (now - before.changedAt >= this.staleAfterMs && before.looks >= this.staleLooks)
        dead.push({ owner, beat });
    }
    for (const owner of this.seen.keys()) if (!present.has(owner)) this.seen.delete(owner);
    return dead;
  }
}
