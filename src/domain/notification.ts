import type { AttachmentInfo } from './attachments.js';
import type { Metadata } from './metadata.js';
import type { BounceCategory, BounceType, BounceVerdict } from './bounce/categories.js';
import { publicStatus, type NotificationState, type PublicStatus } from './notification-state.js';
import type { RelayRole } from './relay-health.js';

/**
 * A notification as it is stored: the row is the job and its whole history's summary. Times are
 * epoch milliseconds; `data` is the placeholder values as JSON text.
 */
export interface Notification {
  readonly id: number;
  readonly request_id: string;
  readonly project_id: number;
  readonly template: string;
  readonly recipient: string;
  readonly data: string;
  readonly type: string;
  readonly state: NotificationState;
  readonly attempts: number;
  readonly run_at: number;
  readonly lease_until: number | null;
  readonly lease_owner: string | null;
  readonly error_message: string | null;
  readonly transport: string | null;
  readonly message_id: string | null;
  readonly subject: string | null;
  readonly text_body: string | null;
  readonly html_body: string | null;
  readonly created_at: number;
  readonly updated_at: number;
  readonly sent_at: number | null;
  /** The time a scheduled send asked for; null for a send without `send_at`. */
  readonly send_at: number | null;
  /** When the placeholder values and rendered content were erased (content retention). */
  readonly content_erased_at: number | null;
  /** When a bounce report turned this sent message failed. */
  readonly bounced_at: number | null;
  /** When the first spam complaint about this message arrived. */
  readonly complained_at: number | null;
  /** The latest bounce: a relay's refusal or a report that came back (product.md §9). */
  readonly bounce_type: BounceType | null;
  readonly bounce_category: BounceCategory | null;
  readonly bounce_status: string | null;
  readonly bounce_diagnostic: string | null;
  /** The locale a send asked for; null for none. */
  readonly locale: string | null;
  /** The variant that rendered (null: the default) and its template version, once rendered. */
  readonly template_locale: string | null;
  readonly template_version: number | null;
  /** The relay of the last attempt: the one that carried it, once sent (product.md §10). */
  readonly relay: RelayRole | null;
  /** While queued after its relay failed or was down: that relay (host and port), whose return makes it due. */
  readonly waits_for_relay: string | null;
  /** The Reply-To mailbox as sent; null for none. */
  readonly reply_to: string | null;
  /** The caller's metadata, a JSON object of strings; null for none. */
  readonly metadata: string | null;
  /** The files' listing, a JSON array of {filename, content_type, size}; null for none. Their bytes are stored apart. */
  readonly attachments: string | null;
  /**
   * While a cancel waits for the worker that claimed the message, before its SMTP transaction:
   * the claim it is about (the `attempts` the canceler saw); null otherwise.
   */
  readonly cancel_request: number | null;
}

/**
 * What a caller sees of a notification: the status body of `GET /notifications/{request_id}`
 * (spec §4.2, product.md §3, §6), and the heart of every event's data.
 */
export interface NotificationView {
  id: number;
  request_id: string;
  status: PublicStatus;
  template: string;
  to: string;
  type: string;
  attempts: number;
  created_at: string;
  updated_at: string;
  sent_at?: string;
  transport?: string;
  /** Which relay carried a sent message: its project's (or Herald's) primary or fallback. */
  relay?: RelayRole;
  error_message?: string;
  send_at?: string;
  last_error?: string;
  next_attempt_at?: string;
  bounced_at?: string;
  /** Why it bounced, in one word and the relay's or report's own (product.md §9). */
  bounce?: BounceVerdict;
  /** Once rendered: the locale variant used (null for the default) and the template version. */
  template_locale?: string | null;
  template_version?: number;
  /** The send's Reply-To, metadata and files (product.md §12), when it had them. */
  reply_to?: string;
  metadata?: Metadata;
  attachments?: AttachmentInfo[];
}

const iso = (ms: number) => new Date(ms).toISOString();

export function notificationView(row: Notification): NotificationView {
  const status = publicStatus(row.state);
  const view: NotificationView = {
    id: row.id,
    request_id: row.request_id,
    status,
    template: row.template,
    to: row.recipient,
    type: row.type,
    attempts: row.attempts,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
  // Sent, or sent and bounced since: when, how and through which relay it went stay visible.
  if (status === 'sent' || (status === 'failed' && row.bounced_at !== null)) {
    if (row.sent_at !== null) view.sent_at = iso(row.sent_at);
    if (row.transport !== null) view.transport = row.transport;
    if (row.relay !== null) view.relay = row.relay;
  }
  if (status === 'failed') {
    view.error_message = row.error_message ?? 'Delivery failed';
    if (row.bounced_at !== null) view.bounced_at = iso(row.bounced_at);
  }
  if (status === 'queued') {
    // Only while it waits for its time: a send_at already past when accepted meant "now".
    if (row.send_at !== null && row.attempts === 0 && row.send_at > row.created_at)
      view.send_at = iso(row.send_at);
    // Back in the queue after a failed attempt: why, and when the next attempt is due.
    if (row.state === 'queued' && row.attempts > 0 && row.error_message !== null) {
      view.last_error = row.error_message;
      view.next_attempt_at = iso(row.run_at);
    }
  }
  if (row.template_version !== null) {
    view.template_locale = row.template_locale;
    view.template_version = row.template_version;
  }
  if (row.bounce_type !== null && row.bounce_category !== null)
    view.bounce = {
      type: row.bounce_type,
      category: row.bounce_category,
      status: row.bounce_status,
      diagnostic: row.bounce_diagnostic ?? '',
    };
  if (row.reply_to !== null) view.reply_to = row.reply_to;
  // Both are written by Herald from checked input (lifecycle.ts `accepted`), never by a caller.
  if (row.metadata !== null) view.metadata = JSON.parse(row.metadata) as Metadata;
  if (row.attachments !== null) view.attachments = JSON.parse(row.attachments) as AttachmentInfo[];
  return view;
}
