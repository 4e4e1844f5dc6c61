import type { Ddl } from './columns.js';

/** Migration 015_message_fields: released, so never edited (a change is a new migration). */
export const messageFields: Ddl = (t) => [
  // What a send may carry besides its template and data (product.md §12). The status body and
  // every event read them from the row: Reply-To, the caller's metadata (a JSON object of
  // strings) and the list of files (a JSON array of {filename, content_type, size}).
  `ALTER TABLE notifications ADD COLUMN reply_to TEXT`,
  `ALTER TABLE notifications ADD COLUMN metadata TEXT`,
  `ALTER TABLE notifications ADD COLUMN attachments TEXT`,
  // The metadata again, one row per key, for the delivery log's `metadata.KEY=VALUE` search: an
  // index finds a project's messages with a value, newest first, without reading the messages.
  `CREATE TABLE notification_metadata (
      notification_id ${t.bigint} NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
      project_id ${t.bigint} NOT NULL,
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (notification_id, key)
    )`,
  `CREATE INDEX notification_metadata_search ON notification_metadata (key, value, project_id, notification_id)`,
  // The files' bytes, apart from the notifications, so a claim, a status lookup or a search never
  // reads them. Each file is written before the send that carries it is accepted, in chunks of
  // 1 MiB, each chunk a transaction of its own: large writes stay out of the accept's transaction
  // (which every project's sends share) and none holds the store's writer for long. The accept
  // then links the file to its notification. Files no accept linked are swept after a while;
  // linked ones are deleted with the rest of the content after HERALD_CONTENT_RETENTION_DAYS.
  `CREATE TABLE file_contents (
      id ${t.id},
      size ${t.bigint} NOT NULL,
      created_at ${t.bigint} NOT NULL
    )`,
  `CREATE TABLE file_chunks (
      content_id ${t.bigint} NOT NULL REFERENCES file_contents(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      bytes ${t.blob} NOT NULL,
      PRIMARY KEY (content_id, seq)
    )`,
  `CREATE TABLE notification_files (
      notification_id ${t.bigint} NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
      position INTEGER NOT NULL,
      content_id ${t.bigint} NOT NULL REFERENCES file_contents(id) ON DELETE CASCADE,
      PRIMARY KEY (notification_id, position)
    )`,
  `CREATE INDEX notification_files_content ON notification_files (content_id)`,
];
