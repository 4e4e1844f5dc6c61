import type { Kysely } from 'kysely';
import type { Database, NewProjectRow, ProjectRow, ProjectUpdate } from './schema.js';

export async function insertProject(db: Kysely<Database>, row: NewProjectRow): Promise<ProjectRow> {
  return db.insertInto('projects').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateProject(
  db: Kysely<Database>,
  id: number,
  changes: ProjectUpdate,
): Promise<ProjectRow | undefined> {
  return db.updateTable('projects').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function findProjectById(db: Kysely<Database>, id: number): Promise<ProjectRow | undefined> {
  return db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findProjectByName(db: Kysely<Database>, name: string): Promise<ProjectRow | undefined> {
  return db.selectFrom('projects').selectAll().where('name', '=', name).executeTakeFirst();
}

export async function findProjectByKeyHash(
  db: Kysely<Database>,
  hash: string,
): Promise<ProjectRow | undefined> {
  return db.selectFrom('projects').selectAll().where('api_key_hash', '=', hash).executeTakeFirst();
}

export async function listProjects(db: Kysely<Database>): Promise<ProjectRow[]> {
  return db.selectFrom('projects').selectAll().orderBy('name').execute();
}
