import type { Kysely } from 'kysely';
import type { Database, NewProjectRow, ProjectRow, ProjectUpdate } from './schema.js';
import { findRow, updateRow } from './rows.js';

export async function insertProject(db: Kysely<Database>, row: NewProjectRow): Promise<ProjectRow> {
  return db.insertInto('projects').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateProject(
  db: Kysely<Database>,
  id: number,
  changes: ProjectUpdate,
): Promise<ProjectRow | undefined> {
  return updateRow(db, 'projects', { id }, changes);
}

export async function findProjectById(db: Kysely<Database>, id: number): Promise<ProjectRow | undefined> {
  return findRow(db, 'projects', { id });
}

export async function findProjectByName(db: Kysely<Database>, name: string): Promise<ProjectRow | undefined> {
  return findRow(db, 'projects', { name });
}

export async function findProjectByKeyHash(
  db: Kysely<Database>,
  hash: string,
): Promise<ProjectRow | undefined> {
  return findRow(db, 'projects', { api_key_hash: hash });
}

export async function listProjects(db: Kysely<Database>): Promise<ProjectRow[]> {
  return db.selectFrom('projects').selectAll().orderBy('name').execute();
}

/** Which of `ids` are projects still (the others were deleted). */
export async function existingProjects(db: Kysely<Database>, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('projects').select('id').where('id', 'in', ids).execute();
  return new Set(rows.map((row) => row.id));
}

/**
 * Deletes a project; everything that belongs to it goes with it (ON DELETE CASCADE): its
 * templates and layouts, SMTP settings, webhook endpoints and events, suppression list, usage,
 * Idempotency-Keys and notifications with their attempts. API log and audit log entries stay.
 */
export async function deleteProjectRow(db: Kysely<Database>, id: number): Promise<boolean> {
  const result = await db.deleteFrom('projects').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
