import type { AttemptResult } from './attempt.js';
import type { BounceVerdict } from './bounce/categories.js';
import { MAX_DIAGNOSTIC } from './bounce/classify.js';
import type { Notification } from './notification.js';
import type { NotificationState } from './notification-state.js';
import type { AttemptRoute, RelayRole } from './relay-health.js';

/**
 * The columns the lifecycle's transitions write (lifecycle.ts), each object built as one literal
 * with every column named: these are built once per message on the delivery path, and spreading a
 * dozen shared columns into each outcome's object made V8 build it property by property (13 µs an
 * attempt).
 */

/** The attempt as the delivery log keeps it, with the relay's reply. */
export interface AttemptRecord {
  readonly smtpCode: number | null;
  readonly response: string;
  readonly transport: string | null;
  readonly relay: RelayRole | null;
}

/** The row's record of a bounce (the status body's `bounce`). */
export type BounceColumns = Pick<
  Notification,
  'bounce_type' | 'bounce_category' | 'bounce_status' | 'bounce_diagnostic'
>;

export const NO_BOUNCE: BounceColumns = {
  bounce_type: null,
  bounce_category: null,
  bounce_status: null,
  bounce_diagnostic: null,
};

/** The record of a bounce the row has now. */
export function bounceOf(row: Notification): BounceColumns {
  return {
    bounce_type: row.bounce_type,
    bounce_category: row.bounce_category,
    bounce_status: row.bounce_status,
    bounce_diagnostic: row.bounce_diagnostic,
  };
}

export function bounceColumns(verdict: BounceVerdict): BounceColumns {
  return {
    bounce_type: verdict.type,
    bounce_category: verdict.category,
    bounce_status: verdict.status,
    bounce_diagnostic: verdict.diagnostic.slice(0, MAX_DIAGNOSTIC),
  };
}

/** What an outcome sets besides what every attempt writes. */
export interface OutcomeColumns {
  readonly state: NotificationState;
  readonly runAt: number;
  readonly sentAt: number | null;
  readonly errorMessage: string | null;
  readonly bounce: BounceColumns;
  readonly waitsForRelay: string | null;
}

/** Every column an attempt writes. */
export function attemptChanges(
  row: Notification,
  result: AttemptResult,
  now: number,
  route: AttemptRoute | null,
  outcome: OutcomeColumns,
) {
  const { rendered } = result;
  return {
    subject: rendered ? rendered.subject : row.subject,
    text_body: rendered ? rendered.text : row.text_body,
    html_body: rendered ? rendered.html : row.html_body,
    // Which variant and version rendered it: what the status body says was sent.
    template_locale: rendered ? (rendered.templateLocale ?? null) : row.template_locale,
    template_version: rendered ? (rendered.templateVersion ?? null) : row.template_version,
    transport: result.transport,
    message_id: result.messageId,
    updated_at: now,
    relay: route?.role ?? null,
    state: outcome.state,
    run_at: outcome.runAt,
    sent_at: outcome.sentAt,
    error_message: outcome.errorMessage,
    bounce_type: outcome.bounce.bounce_type,
    bounce_category: outcome.bounce.bounce_category,
    bounce_status: outcome.bounce.bounce_status,
    bounce_diagnostic: outcome.bounce.bounce_diagnostic,
    waits_for_relay: outcome.waitsForRelay,
  };
}

/** The attempt as the delivery log keeps it. */
export function attemptRecord(
  smtpCode: number | null,
  response: string,
  result: AttemptResult,
  route: AttemptRoute | null,
): AttemptRecord {
  return { smtpCode, response, transport: result.transport, relay: route?.role ?? null };
}
