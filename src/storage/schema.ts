import type { Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { BounceCategory, BounceType } from '../domain/bounce/categories.js';
import type { UsageState } from '../domain/lifecycle.js';
import type { TemplateEngine } from '../domain/message.js';
import type { NotificationState } from '../domain/notification-state.js';
import type { RelayRole } from '../domain/relay-health.js';
import type {
  FileChunksTable,
  FileContentsTable,
  NotificationFilesTable,
  NotificationMetadataTable,
} from './schema-message.js';
import type { AdminTokensTable, AuditLogTable } from './schema-admin.js';
import type { InboundReportsTable, SuppressionsTable } from './schema-bounce.js';

/**
 * The tables, as Kysely sees them. Both backends store the same shapes: timestamps are epoch
 * milliseconds (BIGINT on PostgreSQL, INTEGER on SQLite) and JSON is text.
 * Keeping one representation lets every query that does not need backend-specific SQL be shared.
 */

export type { NotificationState, UsageState };
export type { AdminTokenRow, AuditLogRow, NewAuditLogRow } from './schema-admin.js';
export type { SuppressionReason } from '../domain/suppression.js';
export type { SuppressionRow } from './schema-bounce.js';
export type SmtpSecurity = 'auto' | 'starttls' | 'tls' | 'none';

export interface ProjectsTable {
  id: Generated<number>;
  name: string;
  contact_email: string | null;
  from_email: string | null;
  from_name: string | null;
  quota_limit: number | null;
  quota_period: string;
  api_key_hash: string;
  api_key_prefix: string;
  created_at: number;
  updated_at: number;
}

export interface TemplatesTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  subject: string;
  text_body: string;
  html_body: string | null;
  /** The editor's sample data (JSON text) as last saved; null until the dashboard saves one. */
  sample_data: string | null;
  created_at: number;
  updated_at: number;
  /** The current version; subject and bodies above are its default variant's. */
  version: Generated<number>;
}

export interface TemplateLayoutsTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  html_body: string | null;
  text_body: string | null;
  created_at: number;
  updated_at: number;
}

export interface TemplateVersionsTable {
  id: Generated<number>;
  template_id: number;
  version: number;
  engine: TemplateEngine;
  layout_id: number | null;
  /** What made this version, when not a plain edit (`rollback to 3`). */
  note: string | null;
  created_at: number;
}

export interface TemplateVariantsTable {
  version_id: number;
  /** The BCP 47 tag; '' for the default variant. */
  locale: string;
  subject: string;
  text_body: string;
  html_body: string | null;
}

export interface SmtpSettingsTable {
  project_id: number;
  host: string;
  port: number;
  security: SmtpSecurity;
  username: string | null;
  /** AES-256-GCM ciphertext (see security/cipher.ts); never the password itself. */
  password_enc: string | null;
  from_email: string | null;
  from_name: string | null;
  updated_at: number;
  /** The fallback relay (product.md §10); all null without one. */
  fallback_host: string | null;
  fallback_port: number | null;
  fallback_security: SmtpSecurity | null;
  fallback_username: string | null;
  fallback_password_enc: string | null;
}

export interface NotificationsTable {
  id: Generated<number>;
  request_id: string;
  project_id: number;
  template: string;
  recipient: string;
  data: string;
  type: string;
  state: NotificationState;
  attempts: number;
  run_at: number;
  lease_until: number | null;
  lease_owner: string | null;
  error_message: string | null;
  transport: string | null;
  message_id: string | null;
  subject: string | null;
  text_body: string | null;
  html_body: string | null;
  created_at: number;
  updated_at: number;
  sent_at: number | null;
  /** The time a scheduled send asked for; null for a send without `send_at`. */
  send_at: number | null;
  /** When the placeholder values and rendered content were erased (content retention). */
  content_erased_at: number | null;
  /** When a bounce report turned this sent message failed. */
  bounced_at: number | null;
  /** When the first spam complaint about this message arrived. */
  complained_at: number | null;
  /** The latest bounce (domain/bounce/categories.ts): hard or soft, category, status, diagnostic. */
  bounce_type: BounceType | null;
  bounce_category: BounceCategory | null;
  bounce_status: string | null;
  bounce_diagnostic: string | null;
  /** The locale a send asked for; null for none. */
  locale: string | null;
  /** The variant that rendered (null: the default) and its template version, once rendered. */
  template_locale: string | null;
  template_version: number | null;
  /** The relay of the last attempt, `primary` or `fallback`: once sent, the one that carried it. */
  relay: RelayRole | null;
  /** While queued after its relay failed or was down: that relay (host:port). */
  waits_for_relay: string | null;
  /** The Reply-To mailbox as sent; null for none. */
  reply_to: string | null;
  /** The caller's metadata, a JSON object of strings; null for none. */
  metadata: string | null;
  /** The files' listing, a JSON array of {filename, content_type, size}; null for none. */
  attachments: string | null;
  /**
   * While a cancel waits for the worker that claimed the message: the claim it is about (the
   * `attempts` the canceler saw). See storage/cancel-requests.ts.
   */
  cancel_request: number | null;
}

export interface DeliveryAttemptsTable {
  id: Generated<number>;
  notification_id: number;
  attempt: number;
  started_at: number;
  finished_at: number;
  /** `interrupted`: its worker stopped before the outcome was stored (delivery-attempts.ts). */
  outcome: 'sent' | 'retry' | 'failed' | 'interrupted';
  smtp_code: number | null;
  response: string | null;
  transport: string | null;
  relay: RelayRole | null;
}

/** What every worker knows of a relay (domain/relay-health.ts). */
export interface RelayHealthTable {
  /** `host:port`, the host lowercased (IPv6 in brackets). */
  relay: string;
  host: string;
  port: number;
  /** 1: implicit TLS (smtps), as a probe must connect. */
  tls: number;
  /** 1: the operator's relay, exempt from the outbound rules. */
  trusted: number;
  failures: number;
  down_since: number | null;
  last_error: string | null;
  probes: number;
  probe_at: number | null;
  /** The worker probing it now, until `probe_until`. */
  probe_owner: string | null;
  probe_until: number | null;
  version: number;
  updated_at: number;
}

export interface ApiLogsTable {
  id: Generated<number>;
  created_at: number;
  method: string;
  path: string;
  status_code: number;
  error: string | null;
  latency_ms: number;
  key_prefix: string | null;
  project_id: number | null;
  request_id: string | null;
}

export interface QuotaUsageTable {
  project_id: number;
  window_start: number;
  used: number;
}

export interface IdempotencyKeysTable {
  project_id: number;
  key: string;
  fingerprint: string;
  /** The first response's JSON body; null while that request is still being accepted. */
  response: string | null;
  response_status: number | null;
  created_at: number;
  expires_at: number;
}

export interface AdminsTable {
  id: Generated<number>;
  email: string;
  password_hash: string;
  created_at: number;
  updated_at: number;
}

export interface SessionsTable {
  /** SHA-256 of the session token; the token itself lives only in the browser's cookie. */
  id_hash: string;
  admin_id: number;
  csrf_token: string;
  created_at: number;
  expires_at: number;
}

/** Failed dashboard logins per throttle key, in a fixed window (services/login-throttle.ts). */
export interface LoginAttemptsTable {
  /** SHA-256 of the throttle key. */
  key: string;
  failures: number;
  window_started_at: number;
  updated_at: number;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface UsageCountersTable {
  project_id: number;
  /** The UTC hour the messages were accepted in (epoch ms). */
  hour_start: number;
  state: UsageState;
  count: number;
}

export interface UsageDeltasTable {
  id: Generated<number>;
  project_id: number;
  hour_start: number;
  state: UsageState;
  delta: number;
}

export interface WorkersTable {
  /** The lease owner name of a worker process (host, pid and a random part). */
  owner: string;
  started_at: number;
  /** Moved every heartbeat; only whether it moves matters, not how it compares with other clocks. */
  heartbeat_at: number;
}

export interface WebhookEndpointsTable {
  id: Generated<number>;
  project_id: number;
  url: string;
  /** JSON array of event types; null: every event. */
  events: string | null;
  /** AES-256-GCM ciphertext of the `whsec_…` secret (see security/cipher.ts). */
  secret_enc: string;
  /** 1 or 0: a disabled endpoint receives nothing new. */
  enabled: number;
  created_at: number;
  updated_at: number;
}

export interface WebhookEventsTable {
  id: Generated<number>;
  project_id: number;
  notification_id: number | null;
  /** The Standard Webhooks `webhook-id`: the same on every attempt and endpoint. */
  webhook_id: string;
  type: string;
  /** The JSON body every endpoint receives. */
  payload: string;
  created_at: number;
}

export type WebhookDeliveryState = 'pending' | 'sending' | 'succeeded' | 'failed';

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  event_id: number;
  endpoint_id: number;
  project_id: number;
  state: WebhookDeliveryState;
  attempts: number;
  run_at: number;
  lease_until: number | null;
  lease_owner: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  attempt: number;
  started_at: number;
  latency_ms: number;
  status_code: number | null;
  /** The first bytes of the answer, sanitized. */
  excerpt: string | null;
  /** Why no answer came (timeout, refused, blocked). */
  error: string | null;
}

export interface Database {
  projects: ProjectsTable;
  templates: TemplatesTable;
  template_layouts: TemplateLayoutsTable;
  template_versions: TemplateVersionsTable;
  template_variants: TemplateVariantsTable;
  smtp_settings: SmtpSettingsTable;
  notifications: NotificationsTable;
  notification_metadata: NotificationMetadataTable;
  file_contents: FileContentsTable;
  file_chunks: FileChunksTable;
  notification_files: NotificationFilesTable;
  delivery_attempts: DeliveryAttemptsTable;
  api_logs: ApiLogsTable;
  quota_usage: QuotaUsageTable;
  idempotency_keys: IdempotencyKeysTable;
  admins: AdminsTable;
  sessions: SessionsTable;
  login_attempts: LoginAttemptsTable;
  settings: SettingsTable;
  workers: WorkersTable;
  usage_counters: UsageCountersTable;
  usage_deltas: UsageDeltasTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  suppressions: SuppressionsTable;
  relay_health: RelayHealthTable;
  admin_tokens: AdminTokensTable;
  audit_log: AuditLogTable;
  inbound_reports: InboundReportsTable;
}

export type ProjectRow = Selectable<ProjectsTable>;
export type NewProjectRow = Insertable<ProjectsTable>;
export type ProjectUpdate = Updateable<ProjectsTable>;
export type TemplateRow = Selectable<TemplatesTable>;
export type TemplateLayoutRow = Selectable<TemplateLayoutsTable>;
export type TemplateVersionRow = Selectable<TemplateVersionsTable>;
export type TemplateVariantRow = Selectable<TemplateVariantsTable>;
export type SmtpSettingsRow = Selectable<SmtpSettingsTable>;
export type NotificationRow = Selectable<NotificationsTable>;
export type NewNotificationRow = Insertable<NotificationsTable>;
export type DeliveryAttemptRow = Selectable<DeliveryAttemptsTable>;
export type ApiLogRow = Selectable<ApiLogsTable>;
export type NewApiLogRow = Insertable<ApiLogsTable>;
export type AdminRow = Selectable<AdminsTable>;
export type SessionRow = Selectable<SessionsTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
export type RelayHealthRow = Selectable<RelayHealthTable>;
