import type { ColumnType, Generated } from 'kysely';

/**
 * The tables of what a send carries beside its notification's row (product.md §12, migration
 * 015): its metadata as search rows, and its files' bytes. Part of `Database` (schema.ts).
 */

/** A notification's metadata, one row per key: what the delivery log's search looks up. */
export interface NotificationMetadataTable {
  notification_id: number;
  project_id: number;
  key: string;
  value: string;
}

/** A file, written before the send that carries it is accepted (notification-files.ts). */
export interface FileContentsTable {
  id: Generated<number>;
  /** Bytes in all its chunks. */
  size: number;
  created_at: number;
}

/** A file's bytes, in chunks of at most 1 MiB. */
export interface FileChunksTable {
  content_id: number;
  seq: number;
  bytes: ColumnType<Buffer, Uint8Array, never>;
}

/** Which stored bytes are a notification's files, in the order sent. */
export interface NotificationFilesTable {
  notification_id: number;
  position: number;
  content_id: number;
}
