import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import { insertInChunks } from './rows.js';

/**
 * A send's files. Their bytes are written first (`Storage.writeFileChunks`, driven by the
 * service's FileQueue), in chunks of at most 1 MiB, so the accept's transaction, which every
 * project's sends share, only links them to the notification, and no write holds the store's
 * writer for long. Files no accept linked (a refused send, a crash in between) are swept once they
 * are old enough that no accept can still link them.
 */

export const FILE_CHUNK_BYTES = 1024 * 1024;

/** A piece of a file to write: the first (`contentId` null) creates the file. */
export interface FileChunk {
  readonly contentId: number | null;
  /** The whole file's bytes, recorded with its first chunk. */
  readonly size: number;
  readonly seq: number;
  readonly bytes: Uint8Array;
}

/**
 * Writes chunks of files in one transaction; returns each chunk's file id (new for a first
 * chunk). PostgreSQL's Storage.writeFileChunks, whose writes wait for no other project's; SQLite
 * writes the same rows from a thread (sqlite/file-writer.ts).
 */
export async function insertFileChunks(
  db: Kysely<Database>,
  chunks: readonly FileChunk[],
  now: number,
): Promise<number[]> {
  return db.transaction().execute(async (tx) => {
    const ids: number[] = [];
    for (const chunk of chunks) {
      let id = chunk.contentId;
      if (id === null) {
        const file = await tx
          .insertInto('file_contents')
          .values({ size: chunk.size, created_at: now })
          .returning('id')
          .executeTakeFirstOrThrow();
        id = Number(file.id);
      }
      await tx
        .insertInto('file_chunks')
        .values({ content_id: id, seq: chunk.seq, bytes: chunk.bytes })
        .execute();
      ids.push(id);
    }
    return ids;
  });
}

export interface FileLink {
  readonly notification_id: number;
  readonly position: number;
  readonly content_id: number;
}

/** Links written files to accepted notifications, in the accept's transaction. */
export async function linkFiles(db: Kysely<Database>, links: readonly FileLink[]): Promise<void> {
  await insertInChunks(db, 'notification_files', links);
}

/**
 * A notification's files' bytes in the order they were sent, each read once into one buffer; null
 * when any is gone or incomplete (erased by content retention).
 */
export async function readFiles(db: Kysely<Database>, notificationId: number): Promise<Buffer[] | null> {
  const rows = await db
    .selectFrom('notification_files as f')
    .innerJoin('file_contents as c', 'c.id', 'f.content_id')
    .leftJoin('file_chunks as ch', 'ch.content_id', 'f.content_id')
    .select(['f.position', 'c.size', 'ch.bytes'])
    .where('f.notification_id', '=', notificationId)
    .orderBy('f.position')
    .orderBy('ch.seq')
    .execute();
  const files: { size: number; chunks: Buffer[] }[] = [];
  for (const row of rows) {
    const file = (files[row.position] ??= { size: Number(row.size), chunks: [] });
    if (row.bytes !== null) file.chunks.push(row.bytes);
  }
  const contents = Array.from(files, (file) => (file === undefined ? null : Buffer.concat(file.chunks)));
  if (contents.some((content, i) => content === null || content.length !== files[i]!.size)) return null;
  return contents as Buffer[];
}

/**
 * Deletes a file chunk by chunk, then the file itself with its link: each chunk is a statement
 * of its own, since a statement holds the store's writer while SQLite overwrites the bytes with
 * zeros (secure_delete).
 */
async function deleteFile(db: Kysely<Database>, id: number): Promise<void> {
  const chunks = await db.selectFrom('file_chunks').select('seq').where('content_id', '=', id).execute();
  for (const { seq } of chunks)
    await db.deleteFrom('file_chunks').where('content_id', '=', id).where('seq', '=', seq).execute();
  await db.deleteFrom('file_contents').where('id', '=', id).execute();
}

/** Deletes written files that no notification links to (a send refused after they were written). */
export async function discardFiles(db: Kysely<Database>, contentIds: readonly number[]): Promise<void> {
  for (const id of contentIds) {
    const linked = await db
      .selectFrom('notification_files')
      .select('content_id')
      .where('content_id', '=', id)
      .executeTakeFirst();
    if (linked === undefined) await deleteFile(db, id);
  }
}

/**
 * Deletes up to `limit` files that are not to be kept: those of notifications whose content was
 * erased (content retention), and those written before `unlinkedBefore` that no notification
 * links to. Returns how many. Driven by the files' table, which holds only files not yet erased,
 * so it stays small however long the history grows.
 */
export async function eraseFiles(
  db: Kysely<Database>,
  { unlinkedBefore, limit }: { unlinkedBefore: number; limit: number },
): Promise<number> {
  const doomed = await db
    .selectFrom('file_contents as c')
    .leftJoin('notification_files as f', 'f.content_id', 'c.id')
    .leftJoin('notifications as n', 'n.id', 'f.notification_id')
    .select('c.id')
    .where((eb) =>
      eb.or([
        eb('n.content_erased_at', 'is not', null),
        eb.and([eb('f.content_id', 'is', null), eb('c.created_at', '<', unlinkedBefore)]),
      ]),
    )
    .orderBy('c.id')
    .limit(limit)
    .execute();
  for (const { id } of doomed) await deleteFile(db, Number(id));
  return doomed.length;
}
