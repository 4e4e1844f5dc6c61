import type { Kysely } from 'kysely';
import type { Database, SessionRow } from './schema.js';

export interface SessionWithAdmin extends SessionRow {
  readonly email: string;
}

export async function insertSession(db: Kysely<Database>, row: SessionRow): Promise<void> {
  await db.insertInto('sessions').values(row).execute();
}

/** The live session with this hash and its admin's email; expired sessions are not returned. */
export async function findSession(
  db: Kysely<Database>,
  idHash: string,
  now: number,
): Promise<SessionWithAdmin | undefined> {
  return db
    .selectFrom('sessions')
    .innerJoin('admins', 'admins.id', 'sessions.admin_id')
    .select([
      'sessions.id_hash',
      'sessions.admin_id',
      'sessions.csrf_token',
      'sessions.created_at',
      'sessions.expires_at',
      'admins.email',
    ])
    .where('sessions.id_hash', '=', idHash)
    .where('sessions.expires_at', '>', now)
    .executeTakeFirst();
}

export async function extendSession(db: Kysely<Database>, idHash: string, expiresAt: number): Promise<void> {
  await db.updateTable('sessions').set({ expires_at: expiresAt }).where('id_hash', '=', idHash).execute();
}

export async function deleteSession(db: Kysely<Database>, idHash: string): Promise<void> {
  await db.deleteFrom('sessions').where('id_hash', '=', idHash).execute();
}

export async function deleteSessionsOfAdmin(db: Kysely<Database>, adminId: number): Promise<void> {
  await db.deleteFrom('sessions').where('admin_id', '=', adminId).execute();
}

export async function deleteExpiredSessions(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('sessions').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
