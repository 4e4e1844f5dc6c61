import { attemptColumns, leaseColumns, leaseIndexes, timestamps, type Ddl } from './columns.js';

/** Migration 001_initial: released, so never edited (a change is a new migration). */
export const initial: Ddl = (t) => [
  `CREATE TABLE projects (
      id ${t.id},
      name TEXT NOT NULL UNIQUE,
      contact_email TEXT,
      from_email TEXT,
      from_name TEXT,
      quota_limit INTEGER,
      quota_period TEXT NOT NULL,
      api_key_hash TEXT NOT NULL UNIQUE,
      api_key_prefix TEXT NOT NULL,
      ${timestamps(t)}
    )`,
  `CREATE TABLE templates (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT NOT NULL,
      html_body TEXT,
      ${timestamps(t)},
      UNIQUE (project_id, name)
    )`,
  `CREATE TABLE smtp_settings (
      project_id ${t.bigint} PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
      host TEXT NOT NULL,
      port INTEGER NOT NULL,
      security TEXT NOT NULL,
      username TEXT,
      password_enc TEXT,
      from_email TEXT,
      from_name TEXT,
      updated_at ${t.bigint} NOT NULL
    )`,
  `CREATE TABLE notifications (
      id ${t.id},
      request_id TEXT NOT NULL UNIQUE,
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      template TEXT NOT NULL,
      recipient TEXT NOT NULL,
      data TEXT NOT NULL,
      type TEXT NOT NULL,
      ${leaseColumns(t)},
      error_message TEXT,
      transport TEXT,
      message_id TEXT,
      subject TEXT,
      text_body TEXT,
      html_body TEXT,
      ${timestamps(t)},
      sent_at ${t.bigint}
    )`,
  ...leaseIndexes('notifications', 'run_at', 'queued'),
  `CREATE INDEX notifications_project_created ON notifications (project_id, created_at)`,
  `CREATE INDEX notifications_created ON notifications (created_at)`,
  `CREATE TABLE delivery_attempts (
      ${attemptColumns(t, 'notification_id', 'notifications')},
      finished_at ${t.bigint} NOT NULL,
      outcome TEXT NOT NULL,
      smtp_code INTEGER,
      response TEXT,
      transport TEXT
    )`,
  `CREATE INDEX delivery_attempts_notification ON delivery_attempts (notification_id)`,
  `CREATE TABLE api_logs (
      id ${t.id},
      created_at ${t.bigint} NOT NULL,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      status_code INTEGER NOT NULL,
      error TEXT,
      latency_ms ${t.real} NOT NULL,
      key_prefix TEXT,
      project_id ${t.bigint},
      request_id TEXT
    )`,
  `CREATE INDEX api_logs_created ON api_logs (created_at)`,
  `CREATE INDEX api_logs_project_created ON api_logs (project_id, created_at)`,
  `CREATE TABLE quota_usage (
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      window_start ${t.bigint} NOT NULL,
      used INTEGER NOT NULL,
      PRIMARY KEY (project_id, window_start)
    )`,
  `CREATE TABLE idempotency_keys (
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      response TEXT,
      response_status INTEGER,
      created_at ${t.bigint} NOT NULL,
      expires_at ${t.bigint} NOT NULL,
      PRIMARY KEY (project_id, key)
    )`,
  `CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at)`,
  `CREATE TABLE admins (
      id ${t.id},
      email TEXT NOT NULL UNIQUE,
      password_hash TEXT NOT NULL,
      ${timestamps(t)}
    )`,
  `CREATE TABLE sessions (
      id_hash TEXT PRIMARY KEY,
      admin_id ${t.bigint} NOT NULL REFERENCES admins(id) ON DELETE CASCADE,
      csrf_token TEXT NOT NULL,
      created_at ${t.bigint} NOT NULL,
      expires_at ${t.bigint} NOT NULL
    )`,
  `CREATE TABLE settings (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL
    )`,
];
