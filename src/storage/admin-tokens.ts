import type { Kysely } from 'kysely';
import type { AdminTokenRow, Database } from './schema.js';
import { findRow, updateRow } from './rows.js';

export async function insertAdminToken(
  db: Kysely<Database>,
  row: { name: string; token_hash: string; token_prefix: string; created_at: number },
): Promise<AdminTokenRow> {
  return db
    .insertInto('admin_tokens')
    .values({ ...row, last_used_at: null, revoked_at: null })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Every token, revoked ones too, newest first. */
export async function listAdminTokens(db: Kysely<Database>): Promise<AdminTokenRow[]> {
  return db.selectFrom('admin_tokens').selectAll().orderBy('id', 'desc').execute();
}

export async function countLiveAdminTokens(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('admin_tokens')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function findAdminToken(db: Kysely<Database>, id: number): Promise<AdminTokenRow | undefined> {
  return findRow(db, 'admin_tokens', { id });
}

/** The live (not revoked) token with this hash. */
export async function findLiveAdminTokenByHash(
  db: Kysely<Database>,
  hash: string,
): Promise<AdminTokenRow | undefined> {
  return findRow(db, 'admin_tokens', { token_hash: hash, revoked_at: null });
}

/** Revokes a live token; false when there is none with this id (or it was revoked already). */
export async function revokeAdminToken(db: Kysely<Database>, id: number, now: number): Promise<boolean> {
  return (await updateRow(db, 'admin_tokens', { id, revoked_at: null }, { revoked_at: now })) !== undefined;
}

export async function touchAdminToken(db: Kysely<Database>, id: number, now: number): Promise<void> {
  await updateRow(db, 'admin_tokens', { id }, { last_used_at: now });
}
