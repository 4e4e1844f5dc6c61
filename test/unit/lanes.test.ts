import { describe, expect, it } from 'vitest';
import { lanePolicy, mayUseLane } from '../../src/domain/lanes.js';

describe('lanes shared between relays', () => {
  it('gives a relay at most its connection ceiling and never the reserved quarter', () => {
    expect(lanePolicy({ concurrency: 50, smtpMaxConnections: 20 })).toEqual({
      concurrency: 50,
      perRelay: 20,
      reserved: 13,
    });
    expect(lanePolicy({ concurrency: 20, smtpMaxConnections: 4 }).perRelay).toBe(4);
    expect(lanePolicy({ concurrency: 20, smtpMaxConnections: 50 }).perRelay).toBe(15);
    expect(lanePolicy({ concurrency: 1, smtpMaxConnections: 5 })).toEqual({
      concurrency: 1,
      perRelay: 1,
      reserved: 1,
    });
  });

  const policy = lanePolicy({ concurrency: 20, smtpMaxConnections: 4 });
  it.each([
    // busy lanes of this relay, lanes in use in all (this message's included), may use its lane
    [0, 1, true],
    [3, 10, true],
    [4, 10, false],
    [3, 15, true],
    [3, 16, false],
    // A relay holding no lane takes one of the reserved ones: an idle relay's mail always goes.
    [0, 16, true],
    [0, 20, true],
  ])('busy %i, active %i → %s', (busy, active, allowed) => {
    expect(mayUseLane(policy, busy, active)).toBe(allowed);
  });

  it('holds a relay to its window when that is below its share', () => {
    expect(mayUseLane(policy, 1, 5, 2)).toBe(true);
    expect(mayUseLane(policy, 2, 5, 2)).toBe(false);
    // The window never lifts a relay past its share.
    expect(mayUseLane(policy, 4, 5, 10)).toBe(false);
  });

  it('leaves a lane for an idle relay however many relays stall', () => {
    // Stalled relays take lanes one message at a time until the rule stops them.
    const busy = new Map<number, number>();
    let active = 0;
    for (let round = 0; round < 50; round++) {
      for (let relay = 0; relay < 8; relay++) {
        const held = busy.get(relay) ?? 0;
        if (active < policy.concurrency && mayUseLane(policy, held, active + 1)) {
          busy.set(relay, held + 1);
          active++;
        }
      }
    }
    expect(active).toBeLessThan(policy.concurrency);
    expect(mayUseLane(policy, 0, active + 1)).toBe(true);
  });
});
