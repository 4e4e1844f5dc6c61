import type { Ddl } from './columns.js';

/** Migration 006_scheduled_send: released, so never edited (a change is a new migration). */
export const scheduledSend: Ddl = (t) => [
  // The time a scheduled send asked for (product.md §6); run_at holds when it is next due.
  `ALTER TABLE notifications ADD COLUMN send_at ${t.bigint}`,
];
