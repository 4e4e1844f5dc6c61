import { attemptColumns, leaseColumns, leaseIndexes, timestamps, type Ddl } from './columns.js';

/** Migration 007_webhooks_suppressions: released, so never edited (a change is a new migration). */
export const webhooksSuppressions: Ddl = (t) => [
  // When a bounce report turned a sent message failed (product.md §5).
  `ALTER TABLE notifications ADD COLUMN bounced_at ${t.bigint}`,
  `CREATE TABLE webhook_endpoints (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      url TEXT NOT NULL,
      events TEXT,
      secret_enc TEXT NOT NULL,
      enabled INTEGER NOT NULL DEFAULT 1,
      ${timestamps(t)}
    )`,
  `CREATE INDEX webhook_endpoints_project ON webhook_endpoints (project_id)`,
  // The outbox: one row per event that some endpoint wants, written in the transaction of the
  // state change it reports, with the body every endpoint receives.
  `CREATE TABLE webhook_events (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      notification_id ${t.bigint},
      webhook_id TEXT NOT NULL UNIQUE,
      type TEXT NOT NULL,
      payload TEXT NOT NULL,
      created_at ${t.bigint} NOT NULL
    )`,
  `CREATE INDEX webhook_events_notification ON webhook_events (notification_id)`,
  `CREATE INDEX webhook_events_created ON webhook_events (created_at)`,
  // One event to one endpoint: claimed under a lease like a notification, retried until it
  // succeeds or runs out of attempts.
  `CREATE TABLE webhook_deliveries (
      id ${t.id},
      event_id ${t.bigint} NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
      endpoint_id ${t.bigint} NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      ${leaseColumns(t)},
      last_status_code INTEGER,
      last_error TEXT,
      ${timestamps(t)}
    )`,
  ...leaseIndexes('webhook_deliveries', 'endpoint_id, run_at', 'pending'),
  `CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id)`,
  `CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id)`,
  `CREATE TABLE webhook_attempts (
      ${attemptColumns(t, 'delivery_id', 'webhook_deliveries')},
      latency_ms ${t.real} NOT NULL,
      status_code INTEGER,
      excerpt TEXT,
      error TEXT
    )`,
  `CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id)`,
  // Addresses a project no longer mails; email is stored lowercased, so lookups ignore case.
  `CREATE TABLE suppressions (
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      email TEXT NOT NULL,
      reason TEXT NOT NULL,
      created_at ${t.bigint} NOT NULL,
      request_id TEXT,
      detail TEXT,
      PRIMARY KEY (project_id, email)
    )`,
];
