import { sql, type Kysely } from 'kysely';
import type { AdminRow, Database } from './schema.js';
import { findRow, updateRow } from './rows.js';

/** Setup tokens live in `settings`, one row per token, keyed by this prefix and the token's hash. */
const SETUP_TOKEN_PREFIX = 'setup-token:';

export async function insertAdmin(
  db: Kysely<Database>,
  row: { email: string; password_hash: string; created_at: number; updated_at: number },
): Promise<AdminRow> {
  return db.insertInto('admins').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function findAdminByEmail(db: Kysely<Database>, email: string): Promise<AdminRow | undefined> {
  return findRow(db, 'admins', { email });
}

export async function findAdminById(db: Kysely<Database>, id: number): Promise<AdminRow | undefined> {
  return findRow(db, 'admins', { id });
}

export async function listAdmins(db: Kysely<Database>): Promise<AdminRow[]> {
  return db.selectFrom('admins').selectAll().orderBy('email').execute();
}

export async function countAdmins(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('admins')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function updateAdminPassword(
  db: Kysely<Database>,
  id: number,
  passwordHash: string,
  now: number,
): Promise<boolean> {
  return (
    (await updateRow(db, 'admins', { id }, { password_hash: passwordHash, updated_at: now })) !== undefined
  );
}

/**
 * Deletes the admin with this email, with its sessions, unless it is the only one: the dashboard
 * would then be locked to everyone. Every admin row is written before the count, so two removals
 * racing for the last two admins run one after the other (PostgreSQL's row locks; SQLite's single
 * writer), and the second counts what the first left.
 */
export async function deleteAdminUnlessLast(
  db: Kysely<Database>,
  email: string,
): Promise<
  { readonly outcome: 'deleted'; readonly admin: AdminRow } | { readonly outcome: 'last' | 'missing' }
> {
  return db.transaction().execute(async (tx) => {
    await tx
      .updateTable('admins')
      .set((eb) => ({ updated_at: eb.ref('updated_at') }))
      .execute();
    const admin = await findAdminByEmail(tx, email);
    if (admin === undefined) return { outcome: 'missing' };
    if ((await countAdmins(tx)) <= 1) return { outcome: 'last' };
    await tx.deleteFrom('sessions').where('admin_id', '=', admin.id).execute();
    await tx.deleteFrom('admins').where('id', '=', admin.id).execute();
    return { outcome: 'deleted', admin };
  });
}

export async function insertSetupToken(db: Kysely<Database>, tokenHash: string, now: number): Promise<void> {
  await db
    .insertInto('settings')
    .values({ key: SETUP_TOKEN_PREFIX + tokenHash, value: String(now) })
    .execute();
}

export async function hasSetupToken(db: Kysely<Database>, tokenHash: string): Promise<boolean> {
  const row = await db
    .selectFrom('settings')
    .select('key')
    .where('key', '=', SETUP_TOKEN_PREFIX + tokenHash)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Deletes every setup token in one statement and tells whether `tokenHash` was among them. Two
 * setups racing with different tokens both try to delete the same rows; the second waits for the
 * first to commit and then finds its token gone, so only one first admin is ever created.
 */
export async function consumeSetupTokens(db: Kysely<Database>, tokenHash: string | null): Promise<boolean> {
  const deleted = await db
    .deleteFrom('settings')
    // substr, not LIKE: LIKE is case-insensitive on SQLite and would need its wildcards escaped.
    .where(sql<string>`substr(key, 1, ${sql.lit(SETUP_TOKEN_PREFIX.length)})`, '=', SETUP_TOKEN_PREFIX)
    .returning('key')
    .execute();
  return tokenHash !== null && deleted.some((row) => row.key === SETUP_TOKEN_PREFIX + tokenHash);
}
