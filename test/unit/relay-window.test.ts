import { describe, expect, it } from 'vitest';
import {
  nextWindow,
  openWindow,
  relaySignal,
  windowPolicy,
  windowSize,
  type RelayWindow,
  type TransactionFacts,
} from '../../src/domain/relay-window.js';

const policy = windowPolicy({ smtpMaxConnections: 20, smtpTimeoutMs: 30_000 });

const ok = (durationMs = 100): TransactionFacts => ({
  ok: true,
  smtpCode: 250,
  reply: '250 2.0.0 Ok: queued as 4Xy',
  transient: false,
  durationMs,
});
const failed = (smtpCode: number | null, reply: string, transient = true): TransactionFacts => ({
  ok: false,
  smtpCode,
  reply,
  transient,
  durationMs: 50,
});

describe('what a finished transaction says about its relay', () => {
  it.each<[string, TransactionFacts, string]>([
    ['a prompt 250', ok(100), 'accepted'],
    ['a 250 at a quarter of the deadline', ok(7_500), 'accepted'],
    ['a 250 that took longer than that', ok(7_501), 'neutral'],
    ['421 at the greeting', failed(421, 'SMTP 421 4.3.2 too busy'), 'congested'],
    ['421 without an enhanced status', failed(421, 'SMTP 421 closing connection'), 'congested'],
    ['451 4.7.1 rate limited', failed(451, 'SMTP 451 4.7.1 Too many messages, slow down'), 'congested'],
    ['450 4.7.0 throttled', failed(450, 'SMTP 450 4.7.0 Throttled'), 'congested'],
    ['a connection refused', failed(null, 'connect ECONNREFUSED 127.0.0.1:25 (ESOCKET)'), 'congested'],
    ['the deadline passed', failed(null, 'SMTP transaction did not finish within the deadline'), 'congested'],
    ['452 4.2.2 mailbox full: about the message', failed(452, 'SMTP 452 4.2.2 Mailbox full'), 'neutral'],
    ['451 4.3.0 local error', failed(451, 'SMTP 451 4.3.0 Local error'), 'neutral'],
    ['550 5.1.1 no such user', failed(550, 'SMTP 550 5.1.1 <x@y>: unknown', false), 'neutral'],
    ['550 5.7.1 policy: permanent, not throttling', failed(550, 'SMTP 550 5.7.1 denied', false), 'neutral'],
    ['an outbound rule refused the relay', failed(null, 'SMTP host is a private address', false), 'neutral'],
    ['not an SMTP server', failed(null, 'not an SMTP server', false), 'neutral'],
  ])('%s → %s', (_name, facts, signal) => {
    expect(relaySignal(facts, policy)).toBe(signal);
  });
});

describe('the window of one relay', () => {
  it('starts at 5 (or the ceiling when lower)', () => {
    expect(openWindow(policy)).toEqual({ limit: 5, threshold: 20, round: 0 });
    expect(windowSize(openWindow(windowPolicy({ smtpMaxConnections: 2, smtpTimeoutMs: 1000 })))).toBe(2);
  });

  it.each<[string, RelayWindow, Parameters<typeof nextWindow>[1], RelayWindow]>([
    // slow start: one more per acceptance while below the threshold
    ['full, accepted, slow start', w(5, 20, 0), f('accepted', 0, 5), w(6, 20, 0)],
    ['not full: no evidence', w(5, 20, 0), f('accepted', 0, 4), w(5, 20, 0)],
    ['at the ceiling: stays', w(20, 20, 0), f('accepted', 0, 20), w(20, 20, 0)],
    // after a cut: one more per window's worth of acceptances
    ['full, accepted, past the threshold', w(4, 4, 1), f('accepted', 1, 4), w(4.25, 4, 1)],
    ['fractional window counts whole lanes', w(4.75, 4, 1), f('accepted', 1, 4), w(4.75 + 1 / 4.75, 4, 1)],
    // congestion halves once per round
    ['congested', w(12, 20, 0), f('congested', 0, 12), w(6, 6, 1)],
    ['congested again, started before the cut', w(6, 6, 1), f('congested', 0, 11), w(6, 6, 1)],
    ['congested again, started after the cut', w(6, 6, 1), f('congested', 1, 6), w(3, 3, 2)],
    ['never below one', w(1, 1, 4), f('congested', 4, 1), w(1, 1, 5)],
    ['halving rounds down', w(5.5, 5, 2), f('congested', 2, 5), w(2, 2, 3)],
    ['neutral changes nothing', w(7, 20, 0), f('neutral', 0, 7), w(7, 20, 0)],
  ])('%s', (_name, before, finished, after) => {
    expect(nextWindow(before, finished, policy)).toEqual(after);
  });

  it('grows to the ceiling on a relay that takes all it gets, and finds the limit of one that does not', () => {
    // The worker's loop: a transaction finishes, its answer moves the window, and the lanes are
    // filled up to the window again. A relay with room for `capacity` transactions refuses any
    // connection beyond them.
    const simulate = (capacity: number, completions: number): number[] => {
      let window = openWindow(policy);
      const flying: { round: number; refused: boolean }[] = [];
      const fill = () => {
        while (flying.length < windowSize(window))
          flying.push({ round: window.round, refused: flying.length >= capacity });
      };
      fill();
      const sizes: number[] = [];
      for (let i = 0; i < completions; i++) {
        const done = flying.shift()!;
        const signal = done.refused ? 'congested' : 'accepted';
        window = nextWindow(window, { signal, round: done.round, inFlight: flying.length + 1 }, policy);
        fill();
        sizes.push(windowSize(window));
      }
      return sizes;
    };
    const open = simulate(Infinity, 100);
    expect(open.slice(0, 15)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
    expect(new Set(open.slice(15))).toEqual(new Set([20]));
    const limited = simulate(4, 400);
    // Once it has met the limit, it never tries more than one past it, nor falls below half of it.
    expect(Math.max(...limited.slice(50))).toBe(5);
    expect(Math.min(...limited.slice(50))).toBe(2);
    // Most of the time the window is at the relay's limit or below it.
    const overShare = limited.filter((size) => size > 4).length / limited.length;
    expect(overShare).toBeLessThan(0.3);
  });
});

function w(limit: number, threshold: number, round: number): RelayWindow {
  return { limit, threshold, round };
}

function f(signal: 'accepted' | 'congested' | 'neutral', round: number, inFlight: number) {
  return { signal, round, inFlight } as const;
}
