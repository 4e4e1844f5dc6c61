import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Generated, type Kysely } from 'kysely';
import { loadConfig } from '../../src/config.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { cancelRequestsFor, requestCancel } from '../../src/storage/cancel-requests.js';
import { migrationsFor, POSTGRES_TYPES, SQLITE_TYPES } from '../../src/storage/migrations.js';
import { openStorage } from '../../src/storage/open.js';
import { NOTIFICATION_QUEUE } from '../../src/storage/queue.js';
import type { Database } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { testEnv } from '../helpers/services.js';
import { runHerald } from '../helpers/processes.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * Migrations: applied once, re-running is a no-op, concurrent migrators do not collide, and a
 * database made by an earlier release migrates forward with its data.
 */
const MIGRATIONS = [
  '001_initial',
  '002_content_retention',
  '003_worker_heartbeats',
  '004_usage_counters',
  '005_template_sample_data',
  '006_scheduled_send',
  '007_webhooks_suppressions',
  '008_complaints_once',
  '009_project_change_notices',
  '010_bounce_categories',
  '011_relay_health',
  '013_login_attempts',
  '014_template_versions',
  '015_message_fields',
  '016_admin_tokens',
  '017_inbound_reports',
  '018_cancel_requests',
  '019_project_turns',
];
const TABLES = [
  'admin_tokens',
  'admins',
  'api_logs',
  'audit_log',
  'delivery_attempts',
  'file_chunks',
  'file_contents',
  'herald_migrations',
  'herald_migrations_lock',
  'idempotency_keys',
  'inbound_reports',
  'login_attempts',
  'notification_files',
  'notification_metadata',
  'notifications',
  'projects',
  'quota_usage',
  'relay_health',
  'sessions',
  'settings',
  'smtp_settings',
  'suppressions',
  'template_layouts',
  'template_variants',
  'template_versions',
  'templates',
  'usage_counters',
  'usage_deltas',
  'webhook_attempts',
  'webhook_deliveries',
  'webhook_endpoints',
  'webhook_events',
  'workers',
];

async function tableNames(db: Kysely<unknown>): Promise<string[]> {
  const tables = await db.introspection.getTables();
  return tables.map((table) => table.name).sort();
}

async function appliedMigrations(db: Kysely<unknown>): Promise<string[]> {
  const rows = await (db as Kysely<{ herald_migrations: { name: string } }>)
    .selectFrom('herald_migrations')
    .select('name')
    .orderBy('name')
    .execute();
  return rows.map((row) => row.name);
}

/**
 * Migrates `db` through the migration `name` and no further, as the release that added it left a
 * database; the names applied.
 */
async function migrateThrough(db: Kysely<Database>, name: string): Promise<string[]> {
  const all = migrationsFor(backend === 'postgres' ? POSTGRES_TYPES : SQLITE_TYPES);
  const names = MIGRATIONS.slice(0, MIGRATIONS.indexOf(name) + 1);
  if (names.length === 0) throw new Error(`no migration named ${name}`);
  await migrateToLatest(db, Object.fromEntries(names.map((m) => [m, all[m]!])), { inTransaction: false });
  return names;
}

/** Runs `body` on a storage of its own, on a database made for it and dropped after. */
async function onFreshDatabase(body: (storage: Storage) => Promise<void>): Promise<void> {
  const database = await freshDatabase();
  const storage = openStorage(loadConfig(testEnv(database)).database);
  try {
    await body(storage);
  } finally {
    await storage.close();
    await database.drop();
  }
}

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

describe(`migrations (${backend})`, () => {
  it('creates every table and records each migration once', async () => {
    const db = fx.db as unknown as Kysely<unknown>;
    expect(await tableNames(db)).toEqual(TABLES);
    expect(await appliedMigrations(db)).toEqual(MIGRATIONS);
  });

  it('is a no-op when run again, on the same or another connection, keeping the data', async () => {
    const projectId = await addProject(fx.db);
    await fx.storage.migrate();
    const other = await fx.openAnother();
    await other.migrate();
    const db = fx.db as unknown as Kysely<unknown>;
    expect(await tableNames(db)).toEqual(TABLES);
    expect(await appliedMigrations(db)).toEqual(MIGRATIONS);
    const project = await fx.db.selectFrom('projects').select('id').where('id', '=', projectId).execute();
    expect(project).toHaveLength(1);
  });

  describe('three `herald migrate` processes at once on a fresh database', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await freshDatabase();
    });
    afterAll(() => database?.drop());

    it('all succeed and the schema exists once', { timeout: 90_000 }, async () => {
      const env = testEnv(database);
      // Each process starts a TypeScript loader first; three make an overlap of the migrations likely.
      const results = await Promise.all([1, 2, 3].map(() => runHerald(['migrate', '--json'], env)));
      const applied: string[] = [];
      for (const result of results) {
        // A process that finds no database file says it creates one; nothing else goes to stderr.
        expect(
          result.stderr.split('\n').filter((line) => line !== '' && !line.includes('no database at')),
        ).toEqual([]);
        expect(result.code).toBe(0);
        const printed = JSON.parse(result.stdout) as { applied: string[] };
        expect(printed).toEqual({ migrated: true, database: backend, applied: expect.any(Array) });
        applied.push(...printed.applied);
      }
      // Each migration was applied by one of them, and each says which it applied.
      expect(applied.sort()).toEqual([...MIGRATIONS].sort());
      const storage = openStorage(loadConfig(env).database);
      try {
        const db = storage.db as unknown as Kysely<unknown>;
        expect(await tableNames(db)).toEqual(TABLES);
        expect(await appliedMigrations(db)).toEqual(MIGRATIONS);
      } finally {
        await storage.close();
      }
    });
  });

  it('moves a database of the first release forward, keeping its notifications', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '001_initial');
      const projectId = await addProject(storage.db);
      const id = await addNotification(storage.db, projectId, {
        state: 'sent',
        data: '{"user_name":"Jane"}',
        subject: 'Hi Jane',
      });
      const hour = Date.UTC(2026, 0, 5, 10);
      await addNotification(storage.db, projectId, { state: 'sending', created_at: hour + 5 });
      await addNotification(storage.db, projectId, { state: 'queued', created_at: hour + 3_599_999 });
      await addNotification(storage.db, projectId, { state: 'failed', created_at: hour + 3_600_000 });
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await notification(storage.db, id)).toMatchObject({
        state: 'sent',
        data: '{"user_name":"Jane"}',
        subject: 'Hi Jane',
        content_erased_at: null,
      });
      // The history is counted into the usage counters once, sending as queued.
      const counters = await storage.db
        .selectFrom('usage_counters')
        .select(['hour_start', 'state', 'count'])
        .where('project_id', '=', projectId)
        .orderBy('hour_start')
        .orderBy('state')
        .execute();
      expect(counters.map((row) => [Number(row.hour_start), row.state, Number(row.count)])).toEqual([
        [0, 'sent', 1],
        [hour, 'queued', 2],
        [hour + 3_600_000, 'failed', 1],
      ]);
    });
  });

  it('moves a database of the previous release (006) forward to webhooks and suppressions', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '006_scheduled_send');
      const projectId = await addProject(storage.db);
      const sent = await addNotification(storage.db, projectId, { state: 'sent', subject: 'Hi' });
      const queued = await addNotification(storage.db, projectId, { state: 'queued' });
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await notification(storage.db, sent)).toMatchObject({
        state: 'sent',
        subject: 'Hi',
        bounced_at: null,
      });
      expect(await notification(storage.db, queued)).toMatchObject({ state: 'queued', bounced_at: null });
      // The new tables take rows and keep their constraints.
      const endpoint = await storage.db
        .insertInto('webhook_endpoints')
        .values({
          project_id: projectId,
          url: 'https://x.example/h',
          events: null,
          secret_enc: 'v1:x',
          enabled: 1,
          created_at: 1,
          updated_at: 1,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      expect(endpoint.id).toBeGreaterThan(0);
      const row = {
        project_id: projectId,
        email: 'a@example.org',
        reason: 'manual' as const,
        created_at: 1,
        request_id: null,
        detail: null,
      };
      await storage.db.insertInto('suppressions').values(row).execute();
      await expect(storage.db.insertInto('suppressions').values(row).execute()).rejects.toThrow();
    });
  });

  it('moves a database of the webhooks release (007) forward, keeping its events and list', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '007_webhooks_suppressions');
      const projectId = await addProject(storage.db);
      const sent = await addNotification(storage.db, projectId, { state: 'sent', subject: 'Hi' });
      const event = await storage.db
        .insertInto('webhook_events')
        .values({
          project_id: projectId,
          notification_id: sent,
          webhook_id: 'msg_kept',
          type: 'notification.sent',
          payload: '{"type":"notification.sent"}',
          created_at: 5,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await storage.db
        .insertInto('suppressions')
        .values({
          project_id: projectId,
          email: 'gone@example.org',
          reason: 'hard_bounce',
          created_at: 6,
          request_id: null,
          detail: '550 5.1.1',
        })
        .execute();
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await notification(storage.db, sent)).toMatchObject({
        state: 'sent',
        subject: 'Hi',
        complained_at: null,
      });
      const events = await storage.db.selectFrom('webhook_events').selectAll().execute();
      expect(events).toEqual([expect.objectContaining({ id: event.id, webhook_id: 'msg_kept' })]);
      const list = await storage.db.selectFrom('suppressions').select(['email', 'reason']).execute();
      expect(list).toEqual([{ email: 'gone@example.org', reason: 'hard_bounce' }]);
    });
  });

  it('moves a database of the complaints release (008) forward, keeping its projects and mail', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '008_complaints_once');
      const projectId = await addProject(storage.db);
      const project = await storage.db.selectFrom('projects').selectAll().executeTakeFirstOrThrow();
      const sent = await addNotification(storage.db, projectId, { state: 'sent', subject: 'Kept' });
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await storage.db.selectFrom('projects').selectAll().execute()).toEqual([project]);
      expect(await notification(storage.db, sent)).toMatchObject({ state: 'sent', subject: 'Kept' });
      if (backend === 'postgres') {
        // Changes to projects are announced from now on, and the project is unchanged by it.
        const triggers = await sql<{ tgname: string }>`
          select tgname from pg_trigger where tgrelid = 'projects'::regclass and not tgisinternal`.execute(
          storage.db,
        );
        expect(triggers.rows).toEqual([{ tgname: 'projects_changed' }]);
      }
    });
  });

  it('moves a database of the previous release (009) forward, keeping its bounced mail', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '009_project_change_notices');
      const projectId = await addProject(storage.db);
      const bounced = await addNotification(storage.db, projectId, {
        state: 'failed',
        sent_at: 1_700_000_000_000,
        bounced_at: 1_700_000_100_000,
        error_message: 'Bounced: 550 5.1.1 no such user',
      });
      const rows = await storage.db.selectFrom('notifications').selectAll().execute();
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      // Every row and column as it was; a bounce read before categories existed has none.
      const after = await storage.db.selectFrom('notifications').selectAll().execute();
      expect(after).toEqual(
        rows.map((row) => ({
          ...row,
          bounce_type: null,
          bounce_category: null,
          bounce_status: null,
          bounce_diagnostic: null,
          locale: null,
          template_locale: null,
          template_version: null,
          relay: null,
          waits_for_relay: null,
          reply_to: null,
          metadata: null,
          attachments: null,
          cancel_request: null,
        })),
      );
      expect(await notification(storage.db, bounced)).toMatchObject({
        state: 'failed',
        bounced_at: 1_700_000_100_000,
      });
    });
  });

  it('moves a database of the bounce categories release (010) forward to relay health (011), keeping its mail, attempts and settings', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '010_bounce_categories');
      const projectId = await addProject(storage.db);
      const queued = await addNotification(storage.db, projectId, {
        state: 'queued',
        attempts: 2,
        error_message: 'connect ECONNREFUSED 127.0.0.1:2525 (ECONNECTION)',
      });
      const refused = await addNotification(storage.db, projectId, {
        state: 'failed',
        bounce_type: 'hard',
        bounce_category: 'user_unknown',
      });
      const old = storage.db as unknown as Kysely<Record<string, Record<string, unknown>>>;
      await old
        .insertInto('smtp_settings')
        .values({
          project_id: projectId,
          host: 'relay.example',
          port: 587,
          security: 'auto',
          username: 'u',
          password_enc: 'sealed',
          from_email: null,
          from_name: null,
          updated_at: 1,
        })
        .execute();
      await old
        .insertInto('delivery_attempts')
        .values({
          notification_id: queued,
          attempt: 1,
          started_at: 1,
          finished_at: 2,
          outcome: 'retry',
          smtp_code: null,
          response: 'connect ECONNREFUSED',
          transport: 'smtp',
        })
        .execute();
      const rows = await storage.db.selectFrom('notifications').selectAll().orderBy('id').execute();
      const settings = await old.selectFrom('smtp_settings').selectAll().execute();
      const attempts = await old.selectFrom('delivery_attempts').selectAll().execute();
      // Through 011 alone: later migrations add columns of their own, checked by their tests.
      const through011 = await migrateThrough(storage.db, '011_relay_health');
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(through011);
      // Every row and column as it was; nothing went through a fallback or waits for a relay.
      expect(await storage.db.selectFrom('notifications').selectAll().orderBy('id').execute()).toEqual(
        rows.map((row) => ({ ...row, relay: null, waits_for_relay: null })),
      );
      expect(await old.selectFrom('smtp_settings').selectAll().execute()).toEqual(
        settings.map((row) => ({
          ...row,
          fallback_host: null,
          fallback_port: null,
          fallback_security: null,
          fallback_username: null,
          fallback_password_enc: null,
        })),
      );
      expect(await old.selectFrom('delivery_attempts').selectAll().execute()).toEqual(
        attempts.map((row) => ({ ...row, relay: null })),
      );
      expect(await notification(storage.db, refused)).toMatchObject({ bounce_category: 'user_unknown' });
      // No relay is known yet: every one is taken to be up until attempts say otherwise.
      expect(await storage.db.selectFrom('relay_health').selectAll().execute()).toEqual([]);
    });
  });

  it('moves a database of the bounce categories release (010) forward to the login throttle (013), keeping everything', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '011_relay_health');
      const projectId = await addProject(storage.db);
      await addNotification(storage.db, projectId, {
        state: 'failed',
        sent_at: 1_700_000_000_000,
        bounced_at: 1_700_000_100_000,
        bounce_type: 'hard',
        bounce_category: 'user_unknown',
      });
      await storage.db
        .insertInto('admins')
        .values({ email: 'old@herald.example', password_hash: 'x', created_at: 1, updated_at: 1 })
        .execute();
      const tables = ['projects', 'notifications', 'admins', 'sessions'] as const;
      const rows = await Promise.all(tables.map((t) => storage.db.selectFrom(t).selectAll().execute()));
      // Through 013 alone: later migrations add columns of their own, checked by their tests.
      const through013 = await migrateThrough(storage.db, '013_login_attempts');
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(through013);
      expect(await Promise.all(tables.map((t) => storage.db.selectFrom(t).selectAll().execute()))).toEqual(
        rows,
      );
      expect(await storage.db.selectFrom('login_attempts').selectAll().execute()).toEqual([]);
    });
  });

  it('moves a database of the bounce release (010) forward: every template becomes version 1 of its default variant', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '010_bounce_categories');
      const projectId = await addProject(storage.db);
      // Written in the placeholder syntax, one with braces Handlebars would not parse.
      const db = storage.db as unknown as Kysely<LegacyTemplates>;
      await db
        .insertInto('templates')
        .values([
          legacyTemplate(
            projectId,
            'welcome',
            'Hi {{ name }}',
            'Hello {{name}}',
            '<p>{{{html}}} {{name}}</p>',
          ),
          legacyTemplate(projectId, 'odd', '{{ 1 + 2 }} {{x}}', 'Sum: {{ 1 + 2 }} {{}} {{#if}}', null),
        ])
        .execute();
      const sent = await addNotification(storage.db, projectId, { state: 'sent', subject: 'Hi Jane' });
      const templatesBefore = await db.selectFrom('templates').selectAll().orderBy('id').execute();
      const notificationsBefore = await storage.db.selectFrom('notifications').selectAll().execute();

      // Through 014: later migrations add columns of their own, checked by their tests.
      const through014 = await migrateThrough(storage.db, '014_template_versions');

      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(through014);
      const templatesAfter = await storage.db.selectFrom('templates').selectAll().orderBy('id').execute();
      expect(templatesAfter).toEqual(templatesBefore.map((row) => ({ ...row, version: 1 })));
      const versions = await storage.db
        .selectFrom('template_versions as v')
        .innerJoin('template_variants as x', 'x.version_id', 'v.id')
        .select(['v.template_id', 'v.version', 'v.engine', 'v.layout_id', 'v.created_at'])
        .select(['x.locale', 'x.subject', 'x.text_body', 'x.html_body'])
        .orderBy('v.template_id')
        .execute();
      expect(
        versions.map((v) => ({ ...v, template_id: Number(v.template_id), created_at: Number(v.created_at) })),
      ).toEqual(
        templatesBefore.map((t) => ({
          template_id: Number(t.id),
          version: 1,
          engine: 'placeholders',
          layout_id: null,
          created_at: Number(t.updated_at),
          locale: '',
          subject: t.subject,
          text_body: t.text_body,
          html_body: t.html_body,
        })),
      );
      expect(await storage.db.selectFrom('notifications').selectAll().execute()).toEqual(
        notificationsBefore.map((row) => ({
          ...row,
          relay: null,
          waits_for_relay: null,
          locale: null,
          template_locale: null,
          template_version: null,
        })),
      );
      expect(await notification(storage.db, sent)).toMatchObject({
        subject: 'Hi Jane',
        template_version: null,
      });
    });
  });

  it('moves a database of the template versions release (014) forward to message fields (015), keeping everything', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '014_template_versions');
      const projectId = await addProject(storage.db);
      const ids = [
        await addNotification(storage.db, projectId, { state: 'queued', data: '{"user_name":"Jane"}' }),
        await addNotification(storage.db, projectId, {
          state: 'sent',
          sent_at: 1_700_000_000_000,
          subject: 'Hi Jane',
          text_body: 'Hello',
          locale: 'fr',
          template_locale: 'fr',
          template_version: 3,
          relay: 'fallback',
        }),
        await addNotification(storage.db, projectId, { state: 'failed', error_message: 'Canceled' }),
      ];
      const tables = ['projects', 'notifications', 'templates', 'template_versions', 'usage_deltas'] as const;
      const before = await Promise.all(
        tables.map((t) => storage.db.selectFrom(t).selectAll().execute() as Promise<unknown[]>),
      );

      const through015 = await migrateThrough(storage.db, '015_message_fields');
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(through015);
      const after = await Promise.all(
        tables.map((t) => storage.db.selectFrom(t).selectAll().execute() as Promise<unknown[]>),
      );
      // Every row as it was; the notifications have no Reply-To, metadata or files.
      expect(after).toEqual(
        before.map((rows, i) =>
          tables[i] === 'notifications'
            ? rows.map((row) => ({ ...(row as object), reply_to: null, metadata: null, attachments: null }))
            : rows,
        ),
      );
      for (const table of [
        'notification_metadata',
        'notification_files',
        'file_contents',
        'file_chunks',
      ] as const)
        expect(await storage.db.selectFrom(table).selectAll().execute()).toEqual([]);

      // The new tables take rows, and a file goes with its notification's link when deleted.
      await storage.db
        .insertInto('notification_metadata')
        .values({ notification_id: ids[0]!, project_id: projectId, key: 'order_id', value: 'o-77' })
        .execute();
      const file = await storage.db
        .insertInto('file_contents')
        .values({ size: 3, created_at: 1 })
        .returning('id')
        .executeTakeFirstOrThrow();
      await storage.db
        .insertInto('file_chunks')
        .values({ content_id: file.id, seq: 0, bytes: Buffer.from('pdf') })
        .execute();
      await storage.db
        .insertInto('notification_files')
        .values({ notification_id: ids[0]!, position: 0, content_id: file.id })
        .execute();
      const chunk = await storage.db.selectFrom('file_chunks').select('bytes').executeTakeFirstOrThrow();
      expect(Buffer.from(chunk.bytes).toString()).toBe('pdf');
      await storage.db.deleteFrom('file_contents').where('id', '=', file.id).execute();
      expect(await storage.db.selectFrom('notification_files').selectAll().execute()).toEqual([]);
      expect(await storage.db.selectFrom('file_chunks').selectAll().execute()).toEqual([]);
      // A link to bytes that do not exist is refused.
      await expect(
        storage.db
          .insertInto('notification_files')
          .values({ notification_id: ids[0]!, position: 1, content_id: 999_999 })
          .execute(),
      ).rejects.toThrow();
    });
  });

  it('moves a database of the template versions release (014) forward to admin tokens (016), keeping every row', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '014_template_versions');
      const projectId = await addProject(storage.db);
      await addNotification(storage.db, projectId, { state: 'sent', subject: 'Kept', template_version: 1 });
      await storage.db
        .insertInto('api_logs')
        .values({
          created_at: 5,
          method: 'POST',
          path: '/api/v1/notifications',
          status_code: 202,
          error: null,
          latency_ms: 1.5,
          key_prefix: 'hrl_abcdefgh',
          project_id: projectId,
          request_id: 'r-1',
        })
        .execute();
      const before = {
        projects: await storage.db.selectFrom('projects').selectAll().execute(),
        notifications: await storage.db.selectFrom('notifications').selectAll().execute(),
        api_logs: await storage.db.selectFrom('api_logs').selectAll().execute(),
      };
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      // Later migrations may add columns of their own; every column that was there keeps its value.
      expect(await storage.db.selectFrom('projects').selectAll().execute()).toMatchObject(before.projects);
      expect(await storage.db.selectFrom('notifications').selectAll().execute()).toMatchObject(
        before.notifications,
      );
      expect(await storage.db.selectFrom('api_logs').selectAll().execute()).toEqual(before.api_logs);
      // The new tables take rows; two live tokens never share a name, a revoked one frees it.
      const token = (name: string, hash: string, revoked_at: number | null = null) => ({
        name,
        token_hash: hash,
        token_prefix: 'hrla_abcdefgh',
        created_at: 1,
        last_used_at: null,
        revoked_at,
      });
      await storage.db
        .insertInto('admin_tokens')
        .values(token('ci', 'h1', 7))
        .execute();
      await storage.db.insertInto('admin_tokens').values(token('ci', 'h2')).execute();
      await expect(
        storage.db.insertInto('admin_tokens').values(token('ci', 'h3')).execute(),
      ).rejects.toThrow();
      await expect(
        storage.db.insertInto('admin_tokens').values(token('cd', 'h2')).execute(),
      ).rejects.toThrow();
      await storage.db
        .insertInto('audit_log')
        .values({
          created_at: 9,
          token_id: 2,
          token_name: 'ci',
          method: 'PUT',
          path: '/api/v1/admin/projects/1/templates/welcome',
          status_code: 200,
          error: null,
          project_id: projectId,
        })
        .execute();
      expect(
        await storage.db.selectFrom('audit_log').select(['token_name', 'status_code']).execute(),
      ).toEqual([{ token_name: 'ci', status_code: 200 }]);
    });
  });

  it('moves a database of the admin tokens release (016) forward to read bounce reports (017), keeping everything', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '016_admin_tokens');
      const projectId = await addProject(storage.db);
      await addNotification(storage.db, projectId, { state: 'sent', sent_at: 1_700_000_000_000 });
      const tables = ['projects', 'notifications', 'templates', 'template_versions'] as const;
      const rows = await Promise.all(tables.map((t) => storage.db.selectFrom(t).selectAll().execute()));
      const through017 = await migrateThrough(storage.db, '017_inbound_reports');
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(through017);
      expect(await Promise.all(tables.map((t) => storage.db.selectFrom(t).selectAll().execute()))).toEqual(
        rows,
      );
      // The fingerprint is the key: a second reader of the same report cannot insert it again.
      const row = {
        fingerprint: 'f'.repeat(64),
        state: 'claimed' as const,
        owner: 'a',
        claimed_until: 1,
        outcome: null,
        created_at: 1,
      };
      await storage.db.insertInto('inbound_reports').values(row).execute();
      await expect(
        storage.db
          .insertInto('inbound_reports')
          .values({ ...row, owner: 'b' })
          .execute(),
      ).rejects.toThrow();
      expect(await storage.db.selectFrom('inbound_reports').select('owner').execute()).toEqual([
        { owner: 'a' },
      ]);
    });
  });
});

describe(`migrations (${backend}): cancel requests`, () => {
  it('moves a database of the bounce reports release (017) forward to cancel requests (018), keeping its mail and leases', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '017_inbound_reports');
      const projectId = await addProject(storage.db);
      await addNotification(storage.db, projectId, { state: 'sent', sent_at: 1_700_000_000_000 });
      // A message a worker of the old release holds: its lease survives the upgrade.
      const leased = await addNotification(storage.db, projectId, {
        state: 'sending',
        attempts: 1,
        lease_owner: 'old-worker',
        lease_until: 1_700_000_060_000,
      });
      const rows = await storage.db.selectFrom('notifications').selectAll().execute();
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await storage.db.selectFrom('notifications').selectAll().execute()).toEqual(
        rows.map((row) => ({ ...row, cancel_request: null })),
      );
      // A cancel can ask the worker holding it now, and only under the claim it holds.
      const claim = { id: leased, attempts: 1, lease_owner: 'old-worker', updated_at: 1_000 };
      expect(await requestCancel(storage.db, { ...claim, attempts: 2 })).toBe(false);
      expect(await requestCancel(storage.db, { ...claim, lease_owner: 'another-worker' })).toBe(false);
      expect(await requestCancel(storage.db, claim)).toBe(true);
      expect(await cancelRequestsFor(storage.db, 'old-worker')).toEqual([{ id: leased, attempts: 1 }]);
      expect(await cancelRequestsFor(storage.db, 'another-worker')).toEqual([]);
    });
  });
});

describe(`migrations (${backend}): project turns`, () => {
  it('moves a database of the cancel requests release (018) forward to claims in turns (019), keeping its mail', async () => {
    await onFreshDatabase(async (storage) => {
      await migrateThrough(storage.db, '018_cancel_requests');
      const [busy, quiet] = [await addProject(storage.db), await addProject(storage.db)];
      const backlog: number[] = [];
      for (let i = 0; i < 5; i++)
        backlog.push(await addNotification(storage.db, busy, { run_at: 1_000 + i }));
      const waiting = await addNotification(storage.db, quiet, { run_at: 2_000 });
      await addNotification(storage.db, quiet, { state: 'sent', run_at: 500, sent_at: 600 });
      const rows = await storage.db.selectFrom('notifications').selectAll().execute();
      await storage.migrate();
      expect(await appliedMigrations(storage.db as unknown as Kysely<unknown>)).toEqual(MIGRATIONS);
      expect(await storage.db.selectFrom('notifications').selectAll().execute()).toEqual(rows);
      // The mail queued before the upgrade is claimed in turns: the quiet project's one comes second.
      const claimed = await storage.claim(NOTIFICATION_QUEUE, {
        now: 3_000,
        owner: 'w',
        leaseUntil: 9_000,
        limit: 3,
      });
      expect(claimed.map((row) => row.id)).toEqual([backlog[0], waiting, backlog[1]]);
    });
  });
});

/** The templates table as release 010 had it. */
interface LegacyTemplates {
  templates: {
    id: Generated<number>;
    project_id: number;
    name: string;
    subject: string;
    text_body: string;
    html_body: string | null;
    sample_data: string | null;
    created_at: number;
    updated_at: number;
  };
}

function legacyTemplate(projectId: number, name: string, subject: string, text: string, html: string | null) {
  return {
    project_id: projectId,
    name,
    subject,
    text_body: text,
    html_body: html,
    sample_data: null,
    created_at: 1_700_000_000_000,
    updated_at: 1_700_000_500_000,
  };
}
