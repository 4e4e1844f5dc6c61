import type { Ddl } from './columns.js';

/** Migration 003_worker_heartbeats: released, so never edited (a change is a new migration). */
export const workerHeartbeats: Ddl = (t) => [
  // One row per running worker process, its heartbeat moved every second: a worker whose
  // heartbeat stops moving is dead, and its leases are reclaimed without waiting for them to end.
  `CREATE TABLE workers (
      owner TEXT PRIMARY KEY,
      started_at ${t.bigint} NOT NULL,
      heartbeat_at ${t.bigint} NOT NULL
    )`,
];
