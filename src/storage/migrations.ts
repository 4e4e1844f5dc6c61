import type { Migration } from 'kysely';
import { statements } from './migration-statements.js';

/**
 * The schema, written once as numbered migrations and rendered for each backend: the statements
 * are the same, only the column types differ. Kysely's Migrator applies them in name order and
 * records each by name, so a migration, once released, is never edited: a change is a new one.
 */

/** How each backend spells the schema: its column types, and which backend it is. */
export interface ColumnTypes {
  readonly dialect: 'sqlite' | 'postgres';
  /** An auto-assigned 64-bit primary key. */
  readonly id: string;
  /** A 64-bit integer: ids, counts and epoch-millisecond timestamps. */
  readonly bigint: string;
  /** A double-precision float. */
  readonly real: string;
}

export const SQLITE_TYPES: ColumnTypes = {
  dialect: 'sqlite',
  id: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  bigint: 'INTEGER',
  real: 'REAL',
};

export const POSTGRES_TYPES: ColumnTypes = {
  dialect: 'postgres',
  id: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
  bigint: 'BIGINT',
  real: 'DOUBLE PRECISION',
};

/**
 * Blocks that more than one table spells alike, written once so those tables cannot drift apart.
 * Column blocks render their lines as the CREATE TABLE statements below indent their columns, with
 * no comma after the last. Released migrations use them, so what they render is frozen too:
 * test/unit/migrations-frozen.test.ts compares every released statement with its fixture.
 */
const NEXT_COLUMN = ',\n      ';

/** When a row was created and last changed, in epoch milliseconds. */
const timestamps = (t: ColumnTypes) =>
  [`created_at ${t.bigint} NOT NULL`, `updated_at ${t.bigint} NOT NULL`].join(NEXT_COLUMN);

/** A job claimed under a lease (notifications, webhook deliveries): what the claim and the reaper read. */
const leaseColumns = (t: ColumnTypes) =>
  [
    'state TEXT NOT NULL',
    'attempts INTEGER NOT NULL DEFAULT 0',
    `run_at ${t.bigint} NOT NULL`,
    `lease_until ${t.bigint}`,
    'lease_owner TEXT',
  ].join(NEXT_COLUMN);

/**
 * The claim's index (due rows: those waiting in `waiting`) and the lease reaper's (rows being
 * sent), both partial, so neither grows with the finished rows that pile up.
 */
const leaseIndexes = (table: string, due: string, waiting: string) => [
  `CREATE INDEX ${table}_due ON ${table} (${due}) WHERE state = '${waiting}'`,
  `CREATE INDEX ${table}_leased ON ${table} (lease_until) WHERE state = 'sending'`,
];

/** The head of one attempt's log row: the leased row it belongs to (and goes with), its number, its start. */
const attemptColumns = (t: ColumnTypes, column: string, leased: string) =>
  [
    `id ${t.id}`,
    `${column} ${t.bigint} NOT NULL REFERENCES ${leased}(id) ON DELETE CASCADE`,
    'attempt INTEGER NOT NULL',
    `started_at ${t.bigint} NOT NULL`,
  ].join(NEXT_COLUMN);

type Ddl = (t: ColumnTypes) => readonly string[];

const MIGRATIONS: Record<string, Ddl> = {
  '001_initial': (t) => [
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
  ],
  '002_content_retention': (t) => [
    `ALTER TABLE notifications ADD COLUMN content_erased_at ${t.bigint}`,
    // Finished notifications whose content is still kept, oldest first: what the janitor erases.
    `CREATE INDEX notifications_content_kept ON notifications (updated_at)
      WHERE content_erased_at IS NULL AND state IN ('sent', 'failed')`,
  ],
  '003_worker_heartbeats': (t) => [
    // One row per running worker process, its heartbeat moved every second: a worker whose
    // heartbeat stops moving is dead, and its leases are reclaimed without waiting for them to end.
    `CREATE TABLE workers (
      owner TEXT PRIMARY KEY,
      started_at ${t.bigint} NOT NULL,
      heartbeat_at ${t.bigint} NOT NULL
    )`,
  ],
  '004_usage_counters': (t) => [
    // Messages per project, UTC hour of acceptance and public state (queued counts sending too),
    // so the dashboard's usage and overview never aggregate over every stored notification.
    `CREATE TABLE usage_counters (
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      hour_start ${t.bigint} NOT NULL,
      state TEXT NOT NULL,
      count ${t.bigint} NOT NULL,
      PRIMARY KEY (project_id, hour_start, state)
    )`,
    // Every state change appends its change here, in its own transaction, without contending for
    // a counter row; the janitor folds them into usage_counters. Readers add both.
    `CREATE TABLE usage_deltas (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      hour_start ${t.bigint} NOT NULL,
      state TEXT NOT NULL,
      delta ${t.bigint} NOT NULL
    )`,
    `CREATE INDEX usage_deltas_project ON usage_deltas (project_id, hour_start)`,
    // A project's newest messages in id order (its overview, its delivery log) without sorting
    // all of its history.
    `CREATE INDEX notifications_project_id ON notifications (project_id, id)`,
    // The history so far, counted once when upgrading.
    `INSERT INTO usage_counters (project_id, hour_start, state, count)
      SELECT project_id, created_at - (created_at % 3600000),
        CASE WHEN state = 'sending' THEN 'queued' ELSE state END, COUNT(*)
      FROM notifications
      GROUP BY project_id, created_at - (created_at % 3600000),
        CASE WHEN state = 'sending' THEN 'queued' ELSE state END`,
  ],
  '005_template_sample_data': () => [
    // The sample data last used in the editor, so it survives saving instead of being replaced.
    `ALTER TABLE templates ADD COLUMN sample_data TEXT`,
  ],
  '006_scheduled_send': (t) => [
    // The time a scheduled send asked for (product.md §6); run_at holds when it is next due.
    `ALTER TABLE notifications ADD COLUMN send_at ${t.bigint}`,
  ],
  '007_webhooks_suppressions': (t) => [
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
  ],
  '008_complaints_once': (t) => [
    // When the first complaint about a message arrived: a reporter that resends a report it got
    // no 250 for changes nothing the second time.
    `ALTER TABLE notifications ADD COLUMN complained_at ${t.bigint}`,
  ],
  '009_project_change_notices': (t) =>
    // Every change to projects (a rotated key, a new quota), by any process or by hand, sends a
    // notice on commit on the channel `herald_projects`: server processes listen for it to keep
    // API keys in memory (postgres/project-changes.ts). SQLite needs none: a connection sees
    // other connections' commits in its data_version.
    t.dialect === 'sqlite'
      ? []
      : [
          `CREATE FUNCTION herald_projects_changed() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            PERFORM pg_notify('herald_projects', '');
            RETURN NULL;
          END
          $$`,
          `CREATE TRIGGER projects_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON projects
            FOR EACH STATEMENT EXECUTE FUNCTION herald_projects_changed()`,
        ],
  '010_bounce_categories': () => [
    // The latest bounce of a message, from a relay's refusal or a report that came back, as the
    // classifier read it (product.md §9): hard or soft, its category, enhanced status, diagnostic.
    `ALTER TABLE notifications ADD COLUMN bounce_type TEXT`,
    `ALTER TABLE notifications ADD COLUMN bounce_category TEXT`,
    `ALTER TABLE notifications ADD COLUMN bounce_status TEXT`,
    `ALTER TABLE notifications ADD COLUMN bounce_diagnostic TEXT`,
  ],
  '011_relay_health': (t) => [
    // What every worker knows of a relay (host and port), so that workers agree on one being down
    // and a restarted worker remembers it (domain/relay-health.ts): failures in a row, since when it
    // is down, its last failure, and the probe schedule with the lease of the one probe in flight.
    // `version` moves on every change: a worker writes only over the state it decided on.
    `CREATE TABLE relay_health (
      relay TEXT PRIMARY KEY,
      host TEXT NOT NULL,
      port INTEGER NOT NULL,
      tls INTEGER NOT NULL DEFAULT 0,
      trusted INTEGER NOT NULL DEFAULT 0,
      failures INTEGER NOT NULL DEFAULT 0,
      down_since ${t.bigint},
      last_error TEXT,
      probes INTEGER NOT NULL DEFAULT 0,
      probe_at ${t.bigint},
      probe_owner TEXT,
      probe_until ${t.bigint},
      version INTEGER NOT NULL DEFAULT 0,
      updated_at ${t.bigint} NOT NULL
    )`,
    // A project's fallback relay (product.md §10), its password sealed like the primary's.
    `ALTER TABLE smtp_settings ADD COLUMN fallback_host TEXT`,
    `ALTER TABLE smtp_settings ADD COLUMN fallback_port INTEGER`,
    `ALTER TABLE smtp_settings ADD COLUMN fallback_security TEXT`,
    `ALTER TABLE smtp_settings ADD COLUMN fallback_username TEXT`,
    `ALTER TABLE smtp_settings ADD COLUMN fallback_password_enc TEXT`,
    // Which relay an attempt went to: `primary` or `fallback`.
    `ALTER TABLE notifications ADD COLUMN relay TEXT`,
    `ALTER TABLE delivery_attempts ADD COLUMN relay TEXT`,
    // Queued mail whose relay failed or is down names it, so its return makes that mail due at once.
    `ALTER TABLE notifications ADD COLUMN waits_for_relay TEXT`,
    `CREATE INDEX notifications_waits_for_relay ON notifications (waits_for_relay)
      WHERE waits_for_relay IS NOT NULL`,
  ],
  '013_login_attempts': (t) => [
    // Failed dashboard logins per throttle key (an account from one client, a client, an account),
    // shared by every api process; the key is a SHA-256, so no attempted email is stored.
    `CREATE TABLE login_attempts (
      key TEXT PRIMARY KEY,
      failures INTEGER NOT NULL,
      window_started_at ${t.bigint} NOT NULL,
      updated_at ${t.bigint} NOT NULL
    )`,
    `CREATE INDEX login_attempts_updated ON login_attempts (updated_at)`,
  ],
  '014_template_versions': (t) => [
    // Layouts (product.md §11): a project's shared frames, which template versions point at.
    `CREATE TABLE template_layouts (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      html_body TEXT,
      text_body TEXT,
      ${timestamps(t)},
      UNIQUE (project_id, name)
    )`,
    // Every create or update of a template is a version, a whole snapshot: its layout, its engine
    // and all its variants. A layout still named by an old version can be deleted; the old version
    // then has none.
    `CREATE TABLE template_versions (
      id ${t.id},
      template_id ${t.bigint} NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
      version INTEGER NOT NULL,
      engine TEXT NOT NULL,
      layout_id ${t.bigint} REFERENCES template_layouts(id) ON DELETE SET NULL,
      note TEXT,
      created_at ${t.bigint} NOT NULL,
      UNIQUE (template_id, version)
    )`,
    `CREATE INDEX template_versions_layout ON template_versions (layout_id)`,
    // A version's variants: the default (locale '') and one per locale tag.
    `CREATE TABLE template_variants (
      version_id ${t.bigint} NOT NULL REFERENCES template_versions(id) ON DELETE CASCADE,
      locale TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT NOT NULL,
      html_body TEXT,
      PRIMARY KEY (version_id, locale)
    )`,
    // The version a template is at. Its subject and bodies stay those of that version's default
    // variant, so readers of the template alone need no join.
    `ALTER TABLE templates ADD COLUMN version INTEGER NOT NULL DEFAULT 1`,
    // Every template saved before becomes version 1 of its default variant, in the placeholder
    // engine it was written for, so it renders the same bytes as before.
    `INSERT INTO template_versions (template_id, version, engine, layout_id, note, created_at)
      SELECT id, 1, 'placeholders', NULL, NULL, updated_at FROM templates`,
    `INSERT INTO template_variants (version_id, locale, subject, text_body, html_body)
      SELECT v.id, '', t.subject, t.text_body, t.html_body
      FROM templates t JOIN template_versions v ON v.template_id = t.id`,
    // The locale a send asked for, and the variant and version that rendered it.
    `ALTER TABLE notifications ADD COLUMN locale TEXT`,
    `ALTER TABLE notifications ADD COLUMN template_locale TEXT`,
    `ALTER TABLE notifications ADD COLUMN template_version INTEGER`,
  ],
};

/** The migrations as SQL statements for one backend, by name. */
export function renderMigrations(types: ColumnTypes): Record<string, readonly string[]> {
  return Object.fromEntries(Object.entries(MIGRATIONS).map(([name, ddl]) => [name, ddl(types)]));
}

export function migrationsFor(types: ColumnTypes): Record<string, Migration> {
  return Object.fromEntries(
    Object.entries(renderMigrations(types)).map(([name, list]) => [name, statements(list)]),
  );
}
