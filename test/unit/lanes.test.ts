import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { failedBeforeSending, type AttemptResult } from '../../src/domain/attempt.js';
import { lanePolicy, mayUseLane } from '../../src/domain/lanes.js';
import { windowPolicy } from '../../src/domain/relay-window.js';
import { RelayLanes } from '../../src/worker/relay-lanes.js';

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

describe('a refused connection, judged by what else the relay was serving', () => {
  const lanes = () =>
    new RelayLanes<string>(
      lanePolicy({ concurrency: 20, smtpMaxConnections: 10 }),
      windowPolicy({ smtpMaxConnections: 10, smtpTimeoutMs: 30_000 }),
      pino({ level: 'silent' }),
      () => 1,
    );
  const relay = 'relay.example:25';
  const failure = {
    kind: 'transient',
    message: 'SMTP 421 4.7.0 Too many connections, slow down',
    smtpCode: 421,
    command: 'CONN',
    reached: false,
  } as const;
  const refused = failedBeforeSending(failure);
  const refusedBySmtp: AttemptResult = { ...refused, transport: 'smtp' };
  const sent = {
    ok: true,
    transport: 'smtp',
    smtpCode: 250,
    response: '250 OK',
    rendered: null,
    messageId: '<m@x>',
  } as unknown as AttemptResult;
  const end = (pool: RelayLanes<string>, result: AttemptResult, round: number) => {
    pool.learn(relay, { round, inFlight: pool.inFlight(relay), durationMs: 5 }, result);
    pool.free(relay);
  };

  it('is for room while another transaction of ours is in flight there', () => {
    const pool = lanes();
    pool.take(relay);
    const ticket = pool.take(relay);
    expect(pool.refusedForRoom(relay, refusedBySmtp, ticket)).toBe(true);
  });

  it('is for room when another transaction was served there after it started, even one that already ended', () => {
    const pool = lanes();
    const other = pool.take(relay);
    const ticket = pool.take(relay);
    end(pool, sent, other.round);
    expect(pool.inFlight(relay)).toBe(1);
    expect(pool.refusedForRoom(relay, refusedBySmtp, ticket)).toBe(true);
  });

  it('is a failed attempt when the relay served none of ours meanwhile', () => {
    const pool = lanes();
    const earlier = pool.take(relay);
    end(pool, sent, earlier.round);
    const ticket = pool.take(relay);
    expect(pool.refusedForRoom(relay, refusedBySmtp, ticket)).toBe(false);
    end(pool, refusedBySmtp, ticket.round);
    // Others refused too are not served.
    const other = pool.take(relay);
    const next = pool.take(relay);
    end(pool, refusedBySmtp, other.round);
    expect(pool.refusedForRoom(relay, refusedBySmtp, next)).toBe(false);
  });

  it('is only ever a transient refusal of the connection over SMTP', () => {
    const pool = lanes();
    pool.take(relay);
    const ticket = pool.take(relay);
    expect(pool.refusedForRoom(relay, refused, ticket)).toBe(false);
    const rcpt = { ...refusedBySmtp, failure: { ...failure, command: 'RCPT' } } as AttemptResult;
    expect(pool.refusedForRoom(relay, rcpt, ticket)).toBe(false);
    const permanent = { ...refusedBySmtp, failure: { ...failure, kind: 'permanent' } } as AttemptResult;
    expect(pool.refusedForRoom(relay, permanent, ticket)).toBe(false);
    // nodemailer labels a connection closed after the message's body `CONN` too: the relay had
    // greeted, the message may have reached it, and the attempt counts.
    const dropped = {
      ...refusedBySmtp,
      failure: { ...failure, message: 'Connection closed unexpectedly', smtpCode: null, reached: true },
    } as AttemptResult;
    expect(pool.refusedForRoom(relay, dropped, ticket)).toBe(false);
    // A relay that took the connection and said nothing until nodemailer's greeting timer ran
    // out (it may fire before Herald's deadline) is not answering: the attempt counts.
    const silent = {
      ...refusedBySmtp,
      failure: { ...failure, message: 'Greeting never received', smtpCode: null, timedOut: true },
    } as AttemptResult;
    expect(pool.refusedForRoom(relay, silent, ticket)).toBe(false);
  });

  it('counts as served only what the relay took past its greeting', () => {
    const pool = lanes();
    const ticket = pool.take(relay);
    // Timed out or unresolved before any greeting: nothing the relay served.
    for (const reached of [false, undefined]) {
      const other = pool.take(relay);
      end(
        pool,
        { ...refusedBySmtp, failure: { ...failure, command: null, reached } } as AttemptResult,
        other.round,
      );
    }
    expect(pool.inFlight(relay)).toBe(1);
    expect(pool.refusedForRoom(relay, refusedBySmtp, ticket)).toBe(false);
    // Lost after the greeting: the relay was serving it.
    const other = pool.take(relay);
    const dropped = {
      ...refusedBySmtp,
      failure: { ...failure, message: 'Connection closed unexpectedly', smtpCode: null, reached: true },
    } as AttemptResult;
    end(pool, dropped, other.round);
    expect(pool.refusedForRoom(relay, refusedBySmtp, ticket)).toBe(true);
  });
});
