import type { Ddl } from './columns.js';

/** Migration 008_complaints_once: released, so never edited (a change is a new migration). */
export const complaintsOnce: Ddl = (t) => [
  // When the first complaint about a message arrived: a reporter that resends a report it got
  // no 250 for changes nothing the second time.
  `ALTER TABLE notifications ADD COLUMN complained_at ${t.bigint}`,
];
