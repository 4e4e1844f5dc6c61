import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/domain/api-key.js';
import { KEY_CACHE_MAX_AGE_MS, ProjectService } from '../../src/services/projects.js';
import { openPostgres } from '../../src/storage/postgres/open.js';
import type { ProjectChangesState } from '../../src/storage/postgres/project-changes.js';
import type { Database } from '../../src/storage/schema.js';
import type { Storage } from '../../src/storage/storage.js';
import { createPostgresDatabase } from '../helpers/database.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A server process on PostgreSQL keeps API keys in memory and learns of changes to projects from
 * the notices migration 009's trigger sends on commit. What it must never do is serve a changed
 * key from memory when it could have missed the notice: while its listening connection is down,
 * every lookup goes to the database.
 */
const CHECK_MS = 200;
let database: { url: string; drop(): Promise<void> };
let server: Storage;
let other: Storage;
let projects: ProjectService;
const states: ProjectChangesState[] = [];
/** How far the service's clock is ahead of the real one. */
let clockAhead = 0;

beforeAll(async () => {
  database = await createPostgresDatabase();
  // A short check interval keeps the waits of rotations short; the same in both, as in production.
  other = openPostgres({ url: database.url, projectChangesCheckMs: CHECK_MS });
  await other.migrate();
  server = openPostgres({
    url: database.url,
    watchProjects: true,
    onProjectChanges: (state) => states.push(state),
    projectChangesCheckMs: CHECK_MS,
  });
  projects = new ProjectService(
    server.db,
    { limit: null, period: 'month' },
    { externalChanges: server.externalChanges, now: () => Date.now() + clockAhead },
  );
  await waitUntil(() => (states.at(-1)?.listening ? true : undefined), { what: 'the listener' });
});

afterAll(async () => {
  await server?.close();
  await other?.close();
  await database?.drop();
});

/** Gives the project a new key through the other connection, with or without the trigger. */
async function replaceKey(db: Kysely<Database>, projectId: number, announce: boolean): Promise<string> {
  const replacement = generateApiKey();
  await db.transaction().execute(async (tx) => {
    if (!announce) await sql`ALTER TABLE projects DISABLE TRIGGER projects_changed`.execute(tx);
    await tx
      .updateTable('projects')
      .set({ api_key_hash: replacement.hash, api_key_prefix: replacement.prefix })
      .where('id', '=', projectId)
      .execute();
    if (!announce) await sql`ALTER TABLE projects ENABLE TRIGGER projects_changed`.execute(tx);
  });
  return replacement.key;
}

/** Runs a change made through the server's own connection and waits for its notice. */
async function announced<T>(change: () => Promise<T>): Promise<T> {
  const version = server.externalChanges!();
  const result = await change();
  await waitUntil(() => (server.externalChanges!() !== version ? true : undefined), {
    timeoutMs: 5_000,
    what: 'the notice of the change',
  });
  return result;
}

async function terminateListener(): Promise<void> {
  await sql`
    select pg_terminate_backend(pid) from pg_stat_activity
    where datname = current_database() and application_name = 'herald project changes'`.execute(other.db);
}

describe('API keys in memory on PostgreSQL', () => {
  it('answers from memory while no change is announced', async () => {
    // The project's own INSERT is announced too: its notice must have arrived before the lookup
    // is kept, or it rightly drops it.
    const { project, apiKey } = await announced(() => projects.create({ name: 'silent' }));
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    // A change that sends no notice is not seen: the lookup was answered from memory.
    const newKey = await replaceKey(other.db, project.id, false);
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    // Any announced change to projects drops what was kept.
    await replaceKey(other.db, project.id, true);
    await waitUntil(async () => ((await projects.authenticate(apiKey)) === null ? true : undefined), {
      timeoutMs: 5_000,
      what: 'the old key to be refused',
    });
    expect(await projects.authenticate(newKey)).toBeNull();
  });

  it('refuses a key rotated by another process once the rotation commits', async () => {
    const { project, apiKey } = await announced(() => projects.create({ name: 'announced' }));
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    const newKey = await replaceKey(other.db, project.id, true);
    await waitUntil(async () => ((await projects.authenticate(apiKey)) === null ? true : undefined), {
      timeoutMs: 5_000,
      what: 'the old key to be refused',
    });
    expect((await projects.authenticate(newKey))?.id).toBe(project.id);
  });

  it('refuses the old key as soon as a rotation made by another process has returned', async () => {
    // As `herald project rotate-key` does: another process, which keeps no keys itself, rotates
    // through the service. Once it returns, this process must refuse the old key without a wait.
    const rotating = new ProjectService(
      other.db,
      { limit: null, period: 'month' },
      {
        changesSettleMs: other.projectChangesSettleMs,
      },
    );
    const { project, apiKey } = await announced(() => projects.create({ name: 'rotated-elsewhere' }));
    let key = apiKey;
    for (let round = 0; round < 5; round++) {
      expect((await projects.authenticate(key))?.id).toBe(project.id);
      const rotated = await rotating.rotateKey(project.id);
      expect(await projects.authenticate(key)).toBeNull();
      key = rotated.apiKey;
    }
  });

  it('looks every key up in the database while the listening connection is down, then listens again', async () => {
    const { project, apiKey } = await announced(() => projects.create({ name: 'outage' }));
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    const seen = states.length;
    await terminateListener();
    await waitUntil(() => (states.slice(seen).some((s) => !s.listening) ? true : undefined), {
      what: 'the lost connection to be noticed',
    });
    // No notice can arrive now; a change that sends none is seen at the very next lookup.
    const second = await replaceKey(other.db, project.id, false);
    expect(await projects.authenticate(apiKey)).toBeNull();
    expect((await projects.authenticate(second))?.id).toBe(project.id);
    // It connects again by itself, and keeps keys in memory again.
    await waitUntil(() => (states.at(-1)?.listening ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the listener to come back',
    });
    expect((await projects.authenticate(second))?.id).toBe(project.id);
    await replaceKey(other.db, project.id, false);
    expect((await projects.authenticate(second))?.id).toBe(project.id);
  });

  it('keeps no key while the trigger that announces changes is disabled', async () => {
    const { project, apiKey } = await announced(() => projects.create({ name: 'untriggered' }));
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    const seen = states.length;
    await sql`ALTER TABLE projects DISABLE TRIGGER projects_changed`.execute(other.db);
    try {
      await waitUntil(() => (states.slice(seen).some((s) => !s.listening) ? true : undefined), {
        what: 'the disabled trigger to be noticed',
      });
      const replaced = await replaceKey(other.db, project.id, true);
      expect(await projects.authenticate(apiKey)).toBeNull();
      expect((await projects.authenticate(replaced))?.id).toBe(project.id);
    } finally {
      await sql`ALTER TABLE projects ENABLE TRIGGER projects_changed`.execute(other.db);
    }
    await waitUntil(() => (states.at(-1)?.listening ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the listener to trust the trigger again',
    });
  });

  it('keeps a key no longer than a minute, whatever was announced', async () => {
    const { project, apiKey } = await announced(() => projects.create({ name: 'aged' }));
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    await replaceKey(other.db, project.id, false);
    expect((await projects.authenticate(apiKey))?.id).toBe(project.id);
    clockAhead = KEY_CACHE_MAX_AGE_MS;
    try {
      expect(await projects.authenticate(apiKey)).toBeNull();
    } finally {
      clockAhead = 0;
    }
  });
});
