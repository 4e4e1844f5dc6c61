import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** One file's bytes of one notification, as stored. */
export interface StoredFile {
  readonly notification_id: number;
  readonly position: number;
  readonly content: Uint8Array;
}

/**
 * Writes accepted notifications' files, in the accept's transaction, one statement per file: a
 * file may be 10 MiB, and one statement holding many would only hold more memory at once.
 */
export async function insertFiles(db: Kysely<Database>, files: readonly StoredFile[]): Promise<void> {
  for (const file of files) await db.insertInto('notification_attachments').values(file).execute();
}

/** A notification's files' bytes in the order they were sent; empty once erased. */
export async function readFiles(db: Kysely<Database>, notificationId: number): Promise<Buffer[]> {
  const rows = await db
    .selectFrom('notification_attachments')
    .select('content')
    .where('notification_id', '=', notificationId)
    .orderBy('position')
    .execute();
  return rows.map((row) => row.content);
}

/**
 * Deletes the bytes of up to `limit` files whose notification's content was erased (content
 * retention); returns how many. Driven by the files table, which holds only files not yet
 * erased, so it stays small however long the history grows. One statement per file: each may be
 * 10 MiB, overwritten with zeros on SQLite (secure_delete), and a statement holds the writer.
 */
export async function eraseFiles(db: Kysely<Database>, limit: number): Promise<number> {
  const doomed = await db
    .selectFrom('notification_attachments as a')
    .innerJoin('notifications as n', 'n.id', 'a.notification_id')
    .select(['a.notification_id', 'a.position'])
    .where('n.content_erased_at', 'is not', null)
    .orderBy('a.notification_id')
    .orderBy('a.position')
    .limit(limit)
    .execute();
  let erased = 0;
  for (const { notification_id, position } of doomed) {
    const result = await db
      .deleteFrom('notification_attachments')
      .where('notification_id', '=', notification_id)
      .where('position', '=', position)
      .executeTakeFirst();
    erased += Number(result.numDeletedRows);
  }
  return erased;
}
