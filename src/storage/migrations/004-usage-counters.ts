import type { Ddl } from './columns.js';

/** Migration 004_usage_counters: released, so never edited (a change is a new migration). */
export const usageCounters: Ddl = (t) => [
  // Messages per project, UTC hour of acceptance and public state (queued counts sending too),
  // so the dashboard's usage and overview never aggregate over every stored notification.
  `CREATE TABLE usage_counters (
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      hour_start ${t.bigint} NOT NULL,
      state TEXT NOT NULL,
      count ${t.bigint} NOT NULL,
      PRIMARY KEY (project_id, hour_start, state)
    )`,
  // Every state change appends its change here, in its own transaction, without contending for
  // a counter row; the janitor folds them into usage_counters. Readers add both.
  `CREATE TABLE usage_deltas (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      hour_start ${t.bigint} NOT NULL,
      state TEXT NOT NULL,
      delta ${t.bigint} NOT NULL
    )`,
  `CREATE INDEX usage_deltas_project ON usage_deltas (project_id, hour_start)`,
  // A project's newest messages in id order (its overview, its delivery log) without sorting
  // all of its history.
  `CREATE INDEX notifications_project_id ON notifications (project_id, id)`,
  // The history so far, counted once when upgrading.
  `INSERT INTO usage_counters (project_id, hour_start, state, count)
      SELECT project_id, created_at - (created_at % 3600000),
        CASE WHEN state = 'sending' THEN 'queued' ELSE state END, COUNT(*)
      FROM notifications
      GROUP BY project_id, created_at - (created_at % 3600000),
        CASE WHEN state = 'sending' THEN 'queued' ELSE state END`,
];
