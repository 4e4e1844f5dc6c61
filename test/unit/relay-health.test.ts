import { describe, expect, it } from 'vitest';
import type { AttemptResult, DeliveryFailure } from '../../src/domain/attempt.js';
import { deliveryBackoff } from '../../src/domain/backoff.js';
import { attemptFinished, relayBack } from '../../src/domain/lifecycle.js';
import type { Notification } from '../../src/domain/notification.js';
import {
  afterAttempt,
  afterProbe,
  attemptContact,
  failureContact,
  FORGET_AFTER_MS,
  forgettable,
  HEALTHY,
  probeDelay,
  probeDue,
  recovered,
  relayDownMessage,
  relayHealthPolicy,
  routeAttempt,
  type ContactReport,
  type RelayContact,
  type RelayHealth,
  type Route,
  type RouteFacts,
} from '../../src/domain/relay-health.js';
import { openWindow, reopenWindow, windowPolicy, windowSize } from '../../src/domain/relay-window.js';

/** product.md §10: when a relay is down, how it is probed, and where its mail goes meanwhile. */

const policy = relayHealthPolicy({ retryBaseMs: 30_000 });
const T = 1_000_000;

const failure = (overrides: Partial<DeliveryFailure>): DeliveryFailure => ({
  kind: 'transient',
  message: 'x',
  smtpCode: null,
  ...overrides,
});

describe('what an attempt says about its relay', () => {
  it.each<[string, RelayContact | null, DeliveryFailure]>([
    ['connection refused', 'unreachable', failure({ reached: false, command: 'CONN' })],
    ['no greeting before the deadline', 'unreachable', failure({ reached: false, timedOut: true })],
    ['421 at the greeting', 'unreachable', failure({ smtpCode: 421, reached: false, command: 'CONN' })],
    ['a TLS handshake that failed', 'unreachable', failure({ reached: false, command: 'CONN' })],
    ['greeted, then past the deadline', 'unreachable', failure({ reached: true, timedOut: true })],
    ['451 at MAIL FROM: the relay answered', 'reached', failure({ smtpCode: 451, reached: true })],
    ['550 5.1.1 at RCPT TO', 'reached', failure({ kind: 'permanent', smtpCode: 550, reached: true })],
    ['closed after the final dot', 'reached', failure({ reached: true, command: 'CONN' })],
    ['not an SMTP server (permanent, no greeting)', null, failure({ kind: 'permanent', reached: false })],
    ['an outbound rule: no relay involved', null, failure({ kind: 'permanent' })],
  ])('%s → %s', (_name, contact, given) => {
    expect(failureContact(given)).toBe(contact);
  });

  it('only SMTP attempts say anything: a capture or a missing template does not', () => {
    const base = { rendered: null, messageId: null };
    expect(
      attemptContact({ ok: false, failure: failure({ reached: false }), transport: null, ...base }),
    ).toBe(null);
    expect(
      attemptContact({ ok: false, failure: failure({ reached: false }), transport: 'smtp', ...base }),
    ).toBe('unreachable');
  });
});

const unreachable = (alone = true, error = 'connect ECONNREFUSED'): ContactReport => ({
  contact: 'unreachable',
  error,
  alone,
});
const reached: ContactReport = { contact: 'reached', error: null, alone: true };

function run(reports: readonly ContactReport[], from: RelayHealth = HEALTHY): RelayHealth {
  return reports.reduce((health, report, i) => afterAttempt(health, report, T + i, policy), from);
}

describe('when a relay is judged down', () => {
  it.each<[string, boolean, ContactReport[]]>([
    ['one failure', false, [unreachable()]],
    ['two in a row', false, [unreachable(), unreachable()]],
    ['three in a row, the last alone in flight', true, [unreachable(), unreachable(), unreachable()]],
    [
      'three in a row, the last while others were in flight (a relay at its connection limit)',
      false,
      [unreachable(false), unreachable(false), unreachable(false)],
    ],
    [
      'many while others were in flight, then one alone (the window fell to one)',
      true,
      [unreachable(false), unreachable(false), unreachable(false), unreachable(false), unreachable()],
    ],
    [
      'a success in between starts the count again',
      false,
      [unreachable(), unreachable(), reached, unreachable()],
    ],
    ['three after a success', true, [unreachable(), reached, unreachable(), unreachable(), unreachable()]],
  ])('%s → down: %s', (_name, down, reports) => {
    expect(run(reports).downSince !== null).toBe(down);
  });

  it('keeps its time, the last failure and its first probe', () => {
    const down = run([unreachable(), unreachable(), unreachable(true, 'SMTP 421 4.3.2 too busy')]);
    expect(down).toEqual({
      failures: 3,
      downSince: T + 2,
      lastError: 'SMTP 421 4.3.2 too busy',
      probes: 0,
      probeAt: T + 2 + 5_000,
    });
    expect(relayDownMessage(down)).toBe('Relay down: SMTP 421 4.3.2 too busy');
    // Attempts that were in flight and fail after it went down change nothing but the last error.
    const later = afterAttempt(down, unreachable(false, 'Greeting never received'), T + 9, policy);
    expect(later).toEqual({ ...down, failures: 4, lastError: 'Greeting never received' });
  });

  it('is up again as soon as any attempt reaches it', () => {
    const down = run([unreachable(), unreachable(), unreachable()]);
    const up = afterAttempt(down, reached, T + 10, policy);
    expect(up).toEqual({ ...HEALTHY, lastError: 'connect ECONNREFUSED' });
    expect(recovered(down, up)).toBe(true);
    expect(recovered(up, up)).toBe(false);
    // A relay that is well is left as it is (nothing to store).
    expect(afterAttempt(HEALTHY, reached, T, policy)).toBe(HEALTHY);
  });
});

describe('the probe schedule', () => {
  it('at the defaults: 5 s after it went down, doubling after each failed probe, at most a minute apart', () => {
    expect(policy).toEqual({ downAfter: 3, probeBaseMs: 5_000, probeMaxMs: 60_000 });
    expect([0, 1, 2, 3, 4, 5, 6, 40].map((n) => probeDelay(n, policy))).toEqual([
      5_000, 10_000, 20_000, 40_000, 60_000, 60_000, 60_000, 60_000,
    ]);
  });

  it.each<[number, number, number]>([
    // retry base → first probe, longest interval: never later than a message's first retry
    [30_000, 5_000, 60_000],
    [5_000, 5_000, 60_000],
    [2_000, 2_000, 24_000],
    [500, 500, 6_000],
    [1, 200, 2_400],
  ])('a retry base of %i ms: first probe after %i ms, at most %i ms apart', (retryBaseMs, base, max) => {
    expect(relayHealthPolicy({ retryBaseMs })).toEqual({ downAfter: 3, probeBaseMs: base, probeMaxMs: max });
  });

  it('a failed probe moves the next one; a probe that reaches the relay ends the outage', () => {
    const down = run([unreachable(), unreachable(), unreachable()]);
    expect(probeDue(down, down.probeAt! - 1)).toBe(false);
    expect(probeDue(down, down.probeAt!)).toBe(true);
    const once = afterProbe(
      down,
      { contact: 'unreachable', error: 'connect ECONNREFUSED again' },
      T + 100,
      policy,
    );
    expect(once).toMatchObject({
      probes: 1,
      probeAt: T + 100 + 10_000,
      lastError: 'connect ECONNREFUSED again',
    });
    const twice = afterProbe(once, { contact: null, error: 'not an SMTP server' }, T + 200, policy);
    expect(twice).toMatchObject({ probes: 2, probeAt: T + 200 + 20_000, downSince: down.downSince });
    expect(afterProbe(twice, { contact: 'reached', error: null }, T + 300, policy)).toEqual({
      ...HEALTHY,
      lastError: 'not an SMTP server',
    });
    expect(probeDue(HEALTHY, Infinity)).toBe(false);
  });
});

describe('a relay nobody needs', () => {
  it('may be forgotten after an hour down (if no mail waits for it), never while up', () => {
    const down = run([unreachable(), unreachable(), unreachable()]);
    expect(FORGET_AFTER_MS).toBe(3_600_000);
    expect(forgettable(down, down.downSince! + FORGET_AFTER_MS - 1)).toBe(false);
    expect(forgettable(down, down.downSince! + FORGET_AFTER_MS)).toBe(true);
    expect(forgettable(HEALTHY, Infinity)).toBe(false);
  });
});

const down = run([unreachable(), unreachable(), unreachable(true, 'SMTP 421 busy')]);

describe('where an attempt goes', () => {
  const facts = (overrides: Partial<RouteFacts>): RouteFacts => ({
    lastRole: null,
    retry: false,
    primary: HEALTHY,
    fallback: HEALTHY,
    ...overrides,
  });
  it.each<[string, RouteFacts, Route]>([
    ['a first attempt: the primary', facts({}), { kind: 'send', role: 'primary' }],
    [
      'after a transient failure on the primary: the fallback',
      facts({ retry: true, lastRole: 'primary' }),
      { kind: 'send', role: 'fallback' },
    ],
    [
      'after a failure on the fallback: the primary again',
      facts({ retry: true, lastRole: 'fallback' }),
      { kind: 'send', role: 'primary' },
    ],
    ['the primary down: the fallback', facts({ primary: down }), { kind: 'send', role: 'fallback' }],
    [
      'the fallback down after a primary failure: the primary',
      facts({ retry: true, lastRole: 'primary', fallback: down }),
      { kind: 'send', role: 'primary' },
    ],
    [
      'no fallback, the primary down: not attempted',
      facts({ primary: down, fallback: null }),
      { kind: 'down', role: 'primary', message: 'Relay down: SMTP 421 busy' },
    ],
    [
      'no fallback, a retry after a primary failure: the primary',
      facts({ retry: true, lastRole: 'primary', fallback: null }),
      { kind: 'send', role: 'primary' },
    ],
    [
      'both down: not attempted, named after the relay whose turn it was',
      facts({ primary: down, fallback: { ...down, lastError: 'Greeting never received' } }),
      { kind: 'down', role: 'primary', message: 'Relay down: SMTP 421 busy' },
    ],
  ])('%s', (_name, given, route) => {
    expect(routeAttempt(given)).toEqual(route);
  });
});

describe("a down relay's waiting mail in the lifecycle", () => {
  const attemptPolicy = { maxAttempts: 3, backoff: deliveryBackoff(30_000) };
  const row = (attempts: number): Notification =>
    ({
      id: 1,
      request_id: 'r',
      project_id: 1,
      template: 't',
      recipient: 'jane@example.org',
      data: '{}',
      type: 'email',
      state: 'sending',
      attempts,
      run_at: 0,
      lease_until: null,
      lease_owner: null,
      error_message: null,
      transport: null,
      message_id: null,
      subject: null,
      text_body: null,
      html_body: null,
      created_at: 0,
      updated_at: 0,
      sent_at: null,
      send_at: null,
      content_erased_at: null,
      bounced_at: null,
      complained_at: null,
      bounce_type: null,
      bounce_category: null,
      bounce_status: null,
      bounce_diagnostic: null,
      relay: null,
      waits_for_relay: null,
      locale: null,
      template_locale: null,
      template_version: null,
      reply_to: null,
      metadata: null,
      attachments: null,
      cancel_request: null,
    }) satisfies Notification;
  const notMade = (message: string): AttemptResult => ({
    ok: false,
    failure: { kind: 'transient', message, smtpCode: null },
    transport: null,
    rendered: null,
    messageId: null,
  });
  const route = {
    role: 'primary' as const,
    relay: 'relay.example:25',
    unreachable: true,
    fallbackReady: false,
  };
  const half = () => 0;

  it('an attempt not made is a failed attempt on the schedule, waiting for its relay, final at the last', () => {
    const first = attemptFinished(
      row(1),
      notMade('Relay down: SMTP 421 busy'),
      attemptPolicy,
      T,
      route,
      half,
    );
    expect(first.outcome).toBe('retry');
    expect(first.changes).toMatchObject({
      state: 'queued',
      error_message: 'Relay down: SMTP 421 busy',
      run_at: T + 15_000,
      waits_for_relay: 'relay.example:25',
      relay: 'primary',
    });
    expect(first.attempt).toMatchObject({ relay: 'primary', response: 'Relay down: SMTP 421 busy' });
    expect(first.event?.type).toBe('notification.deferred');
    const last = attemptFinished(row(3), notMade('Relay down: SMTP 421 busy'), attemptPolicy, T, route, half);
    expect(last.outcome).toBe('failed');
    expect(last.changes).toMatchObject({ state: 'failed', waits_for_relay: null });
    expect(last.event?.type).toBe('notification.failed');
  });

  it('a transient failure on the primary with a fallback that is up is due again at once', () => {
    const refused = notMade('connect ECONNREFUSED');
    const withFallback = { ...route, fallbackReady: true };
    expect(attemptFinished(row(1), refused, attemptPolicy, T, withFallback, half).changes.run_at).toBe(T);
    // The fallback failing too: the back-off, then the primary again.
    const onFallback = { ...withFallback, role: 'fallback' as const };
    expect(attemptFinished(row(2), refused, attemptPolicy, T, onFallback, half).changes).toMatchObject({
      run_at: T + 30_000,
      relay: 'fallback',
    });
    // A reply after the greeting: not waiting for the relay.
    const reply = { ...route, unreachable: false };
    expect(attemptFinished(row(1), refused, attemptPolicy, T, reply, half).changes.waits_for_relay).toBe(
      null,
    );
  });

  it('a sent message names the relay that carried it', () => {
    const sent: AttemptResult = {
      ok: true,
      transport: 'smtp',
      smtpCode: 250,
      response: '250 ok',
      rendered: { subject: 's', text: 't', html: null },
      messageId: 'm@x',
    };
    const onFallback = { ...route, role: 'fallback' as const, unreachable: false };
    expect(attemptFinished(row(2), sent, attemptPolicy, T, onFallback).changes).toMatchObject({
      state: 'sent',
      relay: 'fallback',
      waits_for_relay: null,
    });
  });

  it('mail waiting for a relay that is back is due now', () => {
    expect(relayBack(T)).toEqual({
      changes: { run_at: T, waits_for_relay: null },
      requires: { state: 'queued' },
    });
  });
});

describe('the window of a relay that is back', () => {
  const windows = windowPolicy({ smtpMaxConnections: 20, smtpTimeoutMs: 30_000 });
  it('starts at one, slow start up to the initial window, in a new round', () => {
    const reopened = reopenWindow({ limit: 12, threshold: 8, round: 4 }, windows);
    expect(reopened).toEqual({ limit: 1, threshold: 5, round: 5 });
    expect(windowSize(reopened)).toBe(1);
    expect(reopenWindow(openWindow(windows), windows).round).toBe(1);
  });
});
