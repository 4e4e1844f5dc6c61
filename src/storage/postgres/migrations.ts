import type { Migration } from 'kysely';
import { statements } from '../migration-statements.js';

/** PostgreSQL schema, in numbered migrations applied in order by Kysely's Migrator. */
export const postgresMigrations: Record<string, Migration> = {
  '001_initial': statements([
    `CREATE TABLE projects (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      contact_email TEXT,
      from_email TEXT,
      from_name TEXT,
      quota_limit INTEGER,
      quota_period TEXT NOT NULL,
      api_key_hash TEXT NOT NULL UNIQUE,
      api_key_prefix TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`,
    `CREATE TABLE templates (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      project_id BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT NOT NULL,
      html_body TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      UNIQUE (project_id, name)
    )`,
    `CREATE TABLE smtp_settings (
      project_id BIGINT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
      host TEXT NOT NULL,
      port INTEGER NOT NULL,
      security TEXT NOT NULL,
      username TEXT,
      password_enc TEXT,
      from_email TEXT,
      from_name TEXT,
      updated_at BIGINT NOT NULL
    )`,
    `CREATE TABLE notifications (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      request_id TEXT NOT NULL UNIQUE,
      project_id BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      template TEXT NOT NULL,
      recipient TEXT NOT NULL,
      data TEXT NOT NULL,
      type TEXT NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      run_at BIGINT NOT NULL,
      lease_until BIGINT,
      lease_owner TEXT,
      error_message TEXT,
      transport TEXT,
      message_id TEXT,
      subject TEXT,
      text_body TEXT,
      html_body TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      sent_at BIGINT
    )`,
    // Partial indexes keep the claim and the lease reaper cheap however many sent rows pile up.
    `CREATE INDEX notifications_due ON notifications (run_at) WHERE state = 'queued'`,
    `CREATE INDEX notifications_leased ON notifications (lease_until) WHERE state = 'sending'`,
    `CREATE INDEX notifications_project_created ON notifications (project_id, created_at)`,
    `CREATE INDEX notifications_created ON notifications (created_at)`,
    `CREATE TABLE delivery_attempts (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      notification_id BIGINT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
      attempt INTEGER NOT NULL,
      started_at BIGINT NOT NULL,
      finished_at BIGINT NOT NULL,
      outcome TEXT NOT NULL,
      smtp_code INTEGER,
      response TEXT,
      transport TEXT
    )`,
    `CREATE INDEX delivery_attempts_notification ON delivery_attempts (notification_id)`,
    `CREATE TABLE api_logs (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      created_at BIGINT NOT NULL,
      method TEXT NOT NULL,
      path TEXT NOT NULL,
      status_code INTEGER NOT NULL,
      error TEXT,
      latency_ms DOUBLE PRECISION NOT NULL,
      key_prefix TEXT,
      project_id BIGINT,
      request_id TEXT
    )`,
    `CREATE INDEX api_logs_created ON api_logs (created_at)`,
    `CREATE INDEX api_logs_project_created ON api_logs (project_id, created_at)`,
    `CREATE TABLE quota_usage (
      project_id BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      window_start BIGINT NOT NULL,
      used INTEGER NOT NULL,
      PRIMARY KEY (project_id, window_start)
    )`,
    `CREATE TABLE idempotency_keys (
      project_id BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      response TEXT,
      response_status INTEGER,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      PRIMARY KEY (project_id, key)
    )`,
    `CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at)`,
    `CREATE TABLE admins (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      email TEXT NOT NULL UNIQUE,
      password_hash TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`,
    `CREATE TABLE sessions (
      id_hash TEXT PRIMARY KEY,
      admin_id BIGINT NOT NULL REFERENCES admins(id) ON DELETE CASCADE,
      csrf_token TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL
    )`,
    `CREATE TABLE settings (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL
    )`,
  ]),
};
