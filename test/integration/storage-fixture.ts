import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/open.js';
import { insertNotifications } from '../../src/storage/notifications.js';
import { insertProject } from '../../src/storage/projects.js';
import type { Database, NewNotificationRow, NotificationRow } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { backend, freshDatabase, type TestDatabase } from '../helpers/database.js';
import { testEnv } from '../helpers/services.js';

/**
 * The storage contract suites (storage-*.test.ts) run unchanged against whichever backend
 * HERALD_TEST_DATABASE names. They open the store directly, with no services over it, on a fresh
 * migrated database per test file.
 */
export { backend };

export interface StorageFixture {
  readonly storage: Storage;
  readonly db: Kysely<Database>;
  readonly database: TestDatabase;
  /** The environment a `herald` process would need to use this same database. */
  readonly env: Record<string, string>;
  /** Another connection (pool) to the same database, as a second process would have. */
  openAnother(): Promise<Storage>;
  close(): Promise<void>;
}

export async function openTestStorage(): Promise<StorageFixture> {
  const database = await freshDatabase();
  const env = testEnv(database);
  const config = loadConfig(env);
  const storage = openStorage(config.database);
  await storage.migrate();
  const others: Storage[] = [];
  return {
    storage,
    db: storage.db,
    database,
    env,
    async openAnother() {
      const other = openStorage(config.database);
      others.push(other);
      return other;
    },
    async close() {
      for (const other of others) await other.close();
      await storage.close();
      await database.drop();
    },
  };
}

/** A project row with a unique name and key hash. */
export async function addProject(db: Kysely<Database>): Promise<number> {
  const unique = randomUUID();
  const row = await insertProject(db, {
    name: `p-${unique}`,
    contact_email: null,
    from_email: 'noreply@herald.example',
    from_name: null,
    quota_limit: null,
    quota_period: 'month',
    api_key_hash: unique,
    api_key_prefix: 'hrl_test',
    created_at: 1,
    updated_at: 1,
  });
  return row.id;
}

/** A queued notification, due at `run_at` (default: long ago). */
export async function addNotification(
  db: Kysely<Database>,
  projectId: number,
  overrides: Partial<NewNotificationRow> = {},
): Promise<number> {
  const row: NewNotificationRow = {
    request_id: randomUUID(),
    project_id: projectId,
    template: 'welcome',
    recipient: 'jane@example.org',
    data: '{}',
    type: 'email',
    state: 'queued',
    attempts: 0,
    run_at: 1_000,
    created_at: 1_000,
    updated_at: 1_000,
    ...overrides,
  };
  const ids = await insertNotifications(db, [row]);
  return ids.get(row.request_id)!;
}

export async function notification(db: Kysely<Database>, id: number): Promise<NotificationRow> {
  return db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}
