import type { Migration } from 'kysely';
import { statements } from './migration-statements.js';
import type { ColumnTypes, Ddl } from './migrations/columns.js';
import { initial } from './migrations/001-initial.js';
import { contentRetention } from './migrations/002-content-retention.js';
import { workerHeartbeats } from './migrations/003-worker-heartbeats.js';
import { usageCounters } from './migrations/004-usage-counters.js';
import { templateSampleData } from './migrations/005-template-sample-data.js';
import { scheduledSend } from './migrations/006-scheduled-send.js';
import { webhooksSuppressions } from './migrations/007-webhooks-suppressions.js';
import { complaintsOnce } from './migrations/008-complaints-once.js';
import { projectChangeNotices } from './migrations/009-project-change-notices.js';
import { bounceCategories } from './migrations/010-bounce-categories.js';
import { relayHealth } from './migrations/011-relay-health.js';
import { loginAttempts } from './migrations/013-login-attempts.js';
import { templateVersions } from './migrations/014-template-versions.js';
import { messageFields } from './migrations/015-message-fields.js';
import { adminTokens } from './migrations/016-admin-tokens.js';
import { inboundReports } from './migrations/017-inbound-reports.js';
import { cancelRequests } from './migrations/018-cancel-requests.js';
import { projectTurns } from './migrations/019-project-turns.js';

/**
 * The schema, written once as numbered migrations and rendered for each backend: the statements
 * are the same, only the column types differ. Kysely's Migrator applies them in name order and
 * records each by name, so a migration, once released, is never edited: a change is a new one.
 */

export const SQLITE_TYPES: ColumnTypes = {
  dialect: 'sqlite',
  id: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  bigint: 'INTEGER',
  real: 'REAL',
  blob: 'BLOB',
};

export const POSTGRES_TYPES: ColumnTypes = {
  dialect: 'postgres',
  id: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
  bigint: 'BIGINT',
  real: 'DOUBLE PRECISION',
  blob: 'BYTEA',
};

/**
 * Every migration by name, each in its own file under migrations/. A new migration is a new file
 * and a line here; a released one is never edited.
 */
const MIGRATIONS: Record<string, Ddl> = {
  '001_initial': initial,
  '002_content_retention': contentRetention,
  '003_worker_heartbeats': workerHeartbeats,
  '004_usage_counters': usageCounters,
  '005_template_sample_data': templateSampleData,
  '006_scheduled_send': scheduledSend,
  '007_webhooks_suppressions': webhooksSuppressions,
  '008_complaints_once': complaintsOnce,
  '009_project_change_notices': projectChangeNotices,
  '010_bounce_categories': bounceCategories,
  '011_relay_health': relayHealth,
  '013_login_attempts': loginAttempts,
  '014_template_versions': templateVersions,
  '015_message_fields': messageFields,
  '016_admin_tokens': adminTokens,
  '017_inbound_reports': inboundReports,
  '018_cancel_requests': cancelRequests,
  '019_project_turns': projectTurns,
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
