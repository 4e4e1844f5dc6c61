import type { Ddl } from './columns.js';

/** Migration 002_content_retention: released, so never edited (a change is a new migration). */
export const contentRetention: Ddl = (t) => [
  `ALTER TABLE notifications ADD COLUMN content_erased_at ${t.bigint}`,
  // Finished notifications whose content is still kept, oldest first: what the janitor erases.
  `CREATE INDEX notifications_content_kept ON notifications (updated_at)
      WHERE content_erased_at IS NULL AND state IN ('sent', 'failed')`,
];
