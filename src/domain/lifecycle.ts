import type { AttemptResult, DeliveryFailure } from './attempt.js';
import { backoffDelay, type Backoff } from './backoff.js';
import type { BounceVerdict } from './bounce/categories.js';
import { classifyReply, MAX_DIAGNOSTIC } from './bounce/classify.js';
import { Messages } from './errors.js';
import type { NotificationEvent } from './events.js';
import type { Notification, NotificationView } from './notification.js';
import type { NotificationState } from './notification-state.js';
import type { AttemptRoute } from './relay-health.js';
import {
  attemptChanges,
  attemptRecord,
  bounceColumns,
  bounceOf,
  NO_BOUNCE,
  type AttemptRecord,
} from './lifecycle-columns.js';
import { suppressionKey, type SuppressionReason } from './suppression.js';

/**
 * The life of a notification, every state change in one place: accept, the outcome of an
 * attempt (sent, retry or fail, and whether the failure suppresses the address), cancel, a
 * bounce report, a complaint. Each is a pure function of the row as it is now, and returns what
 * changes: the row's columns (and what the row must still hold for them to apply, so of two
 * racing changes exactly one does), the usage counters, the event, the suppression. The service,
 * the worker and the bounce intake apply the result in their transaction (storage/transitions.ts)
 * and decide nothing themselves.
 */

/** A public state (`sending` counts as `queued`) as kept in the usage counters. */
export type UsageState = 'queued' | 'sent' | 'failed';

/** A move of one message in the usage counters, in the hour it was accepted. */
export interface UsageMove {
  readonly projectId: number;
  readonly createdAt: number;
  readonly state: UsageState;
  readonly delta: number;
}

export interface SuppressionEntry {
  readonly projectId: number;
  /** The bare address, lowercased (suppressionKey). */
  readonly email: string;
  readonly reason: SuppressionReason;
  readonly requestId: string;
  readonly detail: string;
}

/** What a bounce report said about the message's recipient. */
export interface BounceFacts {
  /** The message failed for good (the report's Action is `failed`), or was only delayed. */
  readonly final: boolean;
  /** Its reading: hard or soft, category, status, diagnostic (domain/bounce/). */
  readonly verdict: BounceVerdict;
}

/** What an event adds to the notification's view (which already carries its `bounce`). */
export interface EventExtra {
  readonly complaint?: { readonly feedback_type: string };
}

/** The `data` of a notification event (the outbox adds the project's name). */
export type EventData = NotificationView & EventExtra;

export interface LifecycleEvent {
  readonly type: NotificationEvent;
  readonly extra: EventExtra;
}

/** Columns a transition may write. */
export type NotificationChanges = Partial<
  Pick<
    Notification,
    | 'state'
    | 'run_at'
    | 'sent_at'
    | 'error_message'
    | 'transport'
    | 'message_id'
    | 'subject'
    | 'text_body'
    | 'html_body'
    | 'updated_at'
    | 'bounced_at'
    | 'complained_at'
    | 'bounce_type'
    | 'bounce_category'
    | 'bounce_status'
    | 'bounce_diagnostic'
    | 'template_locale'
    | 'template_version'
    | 'relay'
    | 'waits_for_relay'
    | 'attempts'
    | 'lease_owner'
    | 'lease_until'
    | 'cancel_request'
  >
>;

export interface Transition {
  /** The columns the row takes; empty when the row stays as it is (a soft bounce). */
  readonly changes: NotificationChanges;
  /** What the row must still hold for the change to apply (checked in the update itself). */
  readonly requires: Partial<
    Pick<
      Notification,
      'state' | 'complained_at' | 'bounced_at' | 'attempts' | 'lease_owner' | 'cancel_request'
    >
  >;
  readonly usage: readonly UsageMove[];
  readonly event: LifecycleEvent | null;
  readonly suppression: SuppressionEntry | null;
}

/** A message moves from one public state to another in the usage counters. */
function moved(row: Notification, from: UsageState, to: UsageState): UsageMove[] {
  return [
    { projectId: row.project_id, createdAt: row.created_at, state: from, delta: -1 },
    { projectId: row.project_id, createdAt: row.created_at, state: to, delta: 1 },
  ];
}

function suppression(row: Notification, reason: SuppressionReason, detail: string): SuppressionEntry | null {
  const email = suppressionKey(row.recipient);
  if (email === null) return null;
  return {
    projectId: row.project_id,
    email,
    reason,
    requestId: row.request_id,
    detail: detail.slice(0, MAX_DIAGNOSTIC),
  };
}

// Accept --------------------------------------------------------------------------------------

export interface AcceptedSend {
  readonly requestId: string;
  readonly projectId: number;
  readonly template: string;
  readonly recipient: string;
  /** The placeholder values as JSON text. */
  readonly data: string;
  readonly type: string;
  readonly sendAt: number | null;
  /** The template variant asked for (BCP 47); null or absent for the default. */
  readonly locale?: string | null;
  /** Reply-To, and the metadata and list of files as JSON text (product.md §12); null: none. */
  readonly message: Pick<Notification, MessageColumn>;
}

type MessageColumn = 'reply_to' | 'metadata' | 'attachments';
type AcceptedColumn = 'request_id' | 'project_id' | 'template' | 'recipient' | 'data' | 'type' | 'state';
export type AcceptedRow = Pick<
  Notification,
  AcceptedColumn | MessageColumn | 'attempts' | 'run_at' | 'send_at' | 'locale' | 'created_at' | 'updated_at'
>;

/** A new notification: queued, due at its `send_at` (a time already past means now, product.md §6). */
export function accepted(send: AcceptedSend, now: number): { row: AcceptedRow; usage: UsageMove } {
  return {
    row: {
      request_id: send.requestId,
      project_id: send.projectId,
      template: send.template,
      recipient: send.recipient,
      data: send.data,
      type: send.type,
      state: 'queued',
      attempts: 0,
      run_at: Math.max(now, send.sendAt ?? now),
      send_at: send.sendAt,
      locale: send.locale ?? null,
      reply_to: send.message.reply_to,
      metadata: send.message.metadata,
      attachments: send.message.attachments,
      created_at: now,
      updated_at: now,
    },
    // Each accepted message counts once as queued, in the hour it was accepted.
    usage: { projectId: send.projectId, createdAt: now, state: 'queued', delta: 1 },
  };
}

// An attempt's outcome ------------------------------------------------------------------------

export type AttemptOutcome = 'sent' | 'retry' | 'failed';

export interface AttemptPolicy {
  readonly maxAttempts: number;
  readonly backoff: Backoff;
}

export interface AttemptTransition extends Transition {
  readonly outcome: AttemptOutcome;
  /** The attempt as the delivery log keeps it, with the relay's reply. */
  readonly attempt: AttemptRecord;
}

const EVENT_OF: Record<AttemptOutcome, NotificationEvent> = {
  sent: 'notification.sent',
  retry: 'notification.deferred',
  failed: 'notification.failed',
};

/**
 * What an attempt of a claimed (`sending`) message comes to: `sent`; back to `queued` for a retry
 * (a transient failure with attempts left, due after the backoff); or `failed`. What the outcome
 * leaves alone keeps the row's values (content not rendered this time, the time it was due, no
 * sent time yet). `route` names the relay (relay-health.ts): after a transient failure on the
 * primary, a fallback that is up takes the next attempt at once; a failure that did not reach the
 * relay, or an attempt not made because it is down (`Relay down: …`), leaves the message waiting
 * for that relay's return.
 */
export function attemptFinished(
  row: Notification,
  result: AttemptResult,
  policy: AttemptPolicy,
  now: number,
  route: AttemptRoute | null = null,
  random: () => number = Math.random,
): AttemptTransition {
  const requires = { state: 'sending' as NotificationState };
  if (result.ok) {
    return {
      outcome: 'sent',
      changes: attemptChanges(row, result, now, route, {
        state: 'sent',
        runAt: row.run_at,
        sentAt: now,
        errorMessage: null,
        // A refusal of an earlier attempt is history once the relay took the message.
        bounce: NO_BOUNCE,
        waitsForRelay: null,
      }),
      requires,
      usage: moved(row, 'queued', 'sent'),
      event: { type: EVENT_OF.sent, extra: {} },
      suppression: null,
      attempt: attemptRecord(result.smtpCode, result.response, result, route),
    };
  }
  const { failure } = result;
  const outcome = failure.kind === 'transient' && row.attempts < policy.maxAttempts ? 'retry' : 'failed';
  // A reply of the relay's is a bounce, read by the same rules as a report that comes back; a
  // failure without one (no connection, a timeout, no template) is not, and leaves the record.
  const refusal =
    failure.smtpCode === null
      ? null
      : classifyReply({ code: failure.smtpCode, text: failure.message, command: failure.command ?? null });
  // A transient failure on the primary goes to an available fallback at once (product.md §10).
  const atOnce = route?.role === 'primary' && route.fallbackReady;
  return {
    outcome,
    changes: attemptChanges(row, result, now, route, {
      state: outcome === 'retry' ? 'queued' : 'failed',
      runAt:
        outcome !== 'retry'
          ? row.run_at
          : atOnce
            ? now
            : now + backoffDelay(row.attempts, policy.backoff, random),
      sentAt: row.sent_at,
      errorMessage: failure.message,
      bounce: refusal === null ? bounceOf(row) : bounceColumns(refusal),
      // Mail that waits for its relay is due at once when the relay is back (relayBack).
      waitsForRelay: outcome === 'retry' && route?.unreachable === true ? route.relay : null,
    }),
    requires,
    usage: outcome === 'retry' ? [] : moved(row, 'queued', 'failed'),
    event: { type: EVENT_OF[outcome], extra: {} },
    suppression:
      outcome === 'failed' && refusal !== null && refusalSuppresses(failure, refusal)
        ? suppression(row, 'hard_bounce', `${refusal.category}: ${failure.message}`)
        : null,
    attempt: attemptRecord(failure.smtpCode, failure.message, result, route),
  };
}

/**
 * Queued mail waiting for a relay that is back is due now, all of it at once (storage/relay-health.ts);
 * nothing else changes and no event is due: it still waits for its next attempt, only less long.
 */
export function relayBack(now: number) {
  return { changes: { run_at: now, waits_for_relay: null }, requires: { state: 'queued' as const } };
}

/**
 * A relay's permanent refusal of the recipient that proves the address bad (a hard bounce:
 * user_unknown, host_unknown, has_moved) puts it on the project's suppression list; a policy
 * refusal, a full mailbox or any other failure does not. Only a reply to RCPT TO (or DATA) is
 * about the recipient: a relay that checks the sender answers MAIL FROM with 5.1.1 when the
 * Return-Path is in trouble, which says nothing about the mailbox being mailed.
 */
function refusalSuppresses(failure: DeliveryFailure, refusal: BounceVerdict): boolean {
  if (failure.kind !== 'permanent' || refusal.type !== 'hard') return false;
  return failure.command === 'RCPT TO' || failure.command === 'DATA';
}

// Cancel --------------------------------------------------------------------------------------

/** A queued message canceled by its sender: `failed` with `Canceled` (product.md §6); null once it is not queued. */
export function canceled(row: Notification, now: number): Transition | null {
  if (row.state !== 'queued') return null;
  return {
    changes: { state: 'failed', error_message: Messages.canceled, updated_at: now },
    requires: { state: 'queued' },
    usage: moved(row, 'queued', 'failed'),
    event: { type: 'notification.failed', extra: {} },
    suppression: null,
  };
}

/**
 * A claimed message canceled before its SMTP transaction began, decided by the worker that holds
 * it (storage/cancel-requests.ts): `failed` with `Canceled` like a queued one, the lease given up
 * and the claim's attempt uncounted, since none was made. It applies only while `owner` still
 * holds the row under its claim and a cancel asking about that claim still waits (a canceler that
 * stopped waiting has answered 409 and taken its request back).
 */
export function canceledBeforeSending(row: Notification, owner: string, now: number): Transition | null {
  if (row.state !== 'sending' || row.lease_owner !== owner) return null;
  return {
    changes: {
      state: 'failed',
      error_message: Messages.canceled,
      updated_at: now,
      attempts: row.attempts - 1,
      lease_owner: null,
      lease_until: null,
      cancel_request: null,
    },
    requires: { state: 'sending', lease_owner: owner, attempts: row.attempts, cancel_request: row.attempts },
    usage: moved(row, 'queued', 'failed'),
    event: { type: 'notification.failed', extra: {} },
    suppression: null,
  };
}

// Reports that come back ----------------------------------------------------------------------

/**
 * A bounce report about the message's recipient. One that says the message failed for good turns
 * a `sent` message `failed` with `Bounced: <diagnostic>`, and suppresses the address when the
 * bounce is hard (it proves the address bad); one that says it was delayed only becomes an event.
 * Either way the message keeps the report's reading as its `bounce`. Null when there is nothing
 * to apply: the message was never sent (no report can be about it), or it bounced already (a
 * report resent by its MTA changes nothing).
 */
export function bounced(row: Notification, facts: BounceFacts, now: number): Transition | null {
  if (row.sent_at === null) return null;
  const { verdict } = facts;
  const event: LifecycleEvent = { type: 'notification.bounced', extra: {} };
  const columns = bounceColumns(verdict);
  // The first final report decides; a later delay notice does not replace what it recorded.
  if (row.bounced_at !== null) return null;
  if (!facts.final)
    return { changes: columns, requires: { bounced_at: null }, usage: [], event, suppression: null };
  const suppresses =
    verdict.type === 'hard'
      ? suppression(row, 'hard_bounce', `${verdict.category}: ${columns.bounce_diagnostic}`)
      : null;
  if (row.state !== 'sent')
    // No longer `sent` (failed otherwise since): the report still tells about the mailbox.
    return { changes: columns, requires: {}, usage: [], event, suppression: suppresses };
  return {
    changes: {
      ...columns,
      state: 'failed',
      error_message: `Bounced: ${columns.bounce_diagnostic}`,
      bounced_at: now,
      updated_at: now,
    },
    requires: { state: 'sent' },
    usage: moved(row, 'sent', 'failed'),
    event,
    suppression: suppresses,
  };
}

/**
 * A spam complaint: the address is suppressed and `notification.complained` emitted, once: a
 * reporter resending a report it got no 250 for changes nothing the second time.
 */
export function complained(row: Notification, feedbackType: string, now: number): Transition | null {
  // A message never sent reached no inbox to be complained about (a forged or misrouted report).
  if (row.sent_at === null || row.complained_at !== null) return null;
  return {
    changes: { complained_at: now },
    requires: { complained_at: null },
    usage: [],
    event: {
      type: 'notification.complained',
      extra: { complaint: { feedback_type: feedbackType.slice(0, 100) } },
    },
    suppression: suppression(row, 'complaint', `Feedback-Type: ${feedbackType}`),
  };
}
