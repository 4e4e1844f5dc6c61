import type { Ddl } from './columns.js';

/** Migration 018_cancel_requests: released, so never edited (a change is a new migration). */
export const cancelRequests: Ddl = () => [
  // A cancel of a message a worker has claimed but not yet begun to send (product.md §6): the
  // API writes the claim it asks about (the row's `attempts` as it saw them), and the worker that
  // holds the lease answers, in its own order of events, by canceling the message or, once the
  // SMTP transaction has begun, by clearing the request. Null while no cancel waits.
  `ALTER TABLE notifications ADD COLUMN cancel_request INTEGER`,
  // A worker looks for the requests about its own rows at every wake: an index of only the rows
  // with one, so the look costs nothing while none waits.
  `CREATE INDEX notifications_cancel_requests ON notifications (lease_owner) WHERE cancel_request IS NOT NULL`,
];
