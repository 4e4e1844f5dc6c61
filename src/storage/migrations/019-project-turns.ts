import type { Ddl } from './columns.js';

/** Migration 019_project_turns: released, so never edited (a change is a new migration). */
export const projectTurns: Ddl = () => [
  // A worker claims each project's due mail in turn (queue.ts, `inTurns`), so one project's
  // backlog never holds another's mail back: it reads the oldest due rows of each project here.
  `CREATE INDEX notifications_project_due ON notifications (project_id, run_at) WHERE state = 'queued'`,
];
