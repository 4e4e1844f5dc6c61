import { describe, expect, it } from 'vitest';
import { LivenessJudge } from '../../src/domain/liveness.js';

describe('worker liveness', () => {
  it('judges a worker dead once its heartbeat has not moved for the stale time', () => {
    const judge = new LivenessJudge(5000);
    for (let t = 0; t < 5000; t += 1000) expect(judge.observe([{ owner: 'a', beat: 1 }], t)).toEqual([]);
    expect(judge.observe([{ owner: 'a', beat: 1 }], 5000)).toEqual([{ owner: 'a', beat: 1 }]);
  });

  it('keeps a worker alive while its heartbeat moves, whatever the values say about clocks', () => {
    const judge = new LivenessJudge(5000);
    // The beat values come from another machine's clock, far behind this one: only change counts.
    for (let t = 0; t <= 60_000; t += 1000) {
      expect(judge.observe([{ owner: 'a', beat: t - 3_600_000 }], t)).toEqual([]);
    }
  });

  it('needs the stale time of its own observation before judging a worker it has just met', () => {
    // A restarted process meets the killed worker's last heartbeat for the first time.
    const judge = new LivenessJudge(5000);
    for (let t = 100_000; t < 105_000; t += 1000)
      expect(judge.observe([{ owner: 'old', beat: 42 }], t)).toEqual([]);
    expect(judge.observe([{ owner: 'old', beat: 42 }], 105_000)).toEqual([{ owner: 'old', beat: 42 }]);
  });

  it('judges each worker on its own and forgets workers that are gone', () => {
    const judge = new LivenessJudge(1000, 1);
    judge.observe(
      [
        { owner: 'a', beat: 1 },
        { owner: 'b', beat: 1 },
      ],
      0,
    );
    const dead = judge.observe(
      [
        { owner: 'a', beat: 1 },
        { owner: 'b', beat: 2 },
      ],
      1000,
    );
    expect(dead).toEqual([{ owner: 'a', beat: 1 }]);
    // 'a' disappears (its row was removed) and comes back: it is new again.
    judge.observe([{ owner: 'b', beat: 3 }], 1500);
    expect(judge.observe([{ owner: 'a', beat: 1 }], 1600)).toEqual([]);
  });

  it('does not judge a peer by a stall of the store that stopped the observer too', () => {
    // The store was locked for 11 s: neither worker could beat. The observer's first look after
    // it finds the peer's heartbeat 11 s old; the peer's own beat is still queued behind the lock.
    const judge = new LivenessJudge(5000);
    expect(judge.observe([{ owner: 'peer', beat: 7 }], 0)).toEqual([]);
    expect(judge.observe([{ owner: 'peer', beat: 7 }], 11_000)).toEqual([]);
    expect(judge.observe([{ owner: 'peer', beat: 7 }], 12_000)).toEqual([]);
    // Its beat lands: alive. Had it not, the observer's fifth look would have judged it dead.
    expect(judge.observe([{ owner: 'peer', beat: 8 }], 13_000)).toEqual([]);
    for (let t = 14_000; t < 18_000; t += 1000)
      expect(judge.observe([{ owner: 'peer', beat: 8 }], t)).toEqual([]);
    expect(judge.observe([{ owner: 'peer', beat: 8 }], 18_000)).toEqual([{ owner: 'peer', beat: 8 }]);
  });
});
