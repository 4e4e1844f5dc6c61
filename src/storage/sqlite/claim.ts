import { sql } from 'kysely';
import { projectsClaimed, type ClaimBackend, type ClaimParts, type HeadRow } from '../claim.js';

/**
 * SQLite has one writer at a time, so `UPDATE … WHERE id IN (SELECT … LIMIT n)` is atomic on its
 * own: no two workers can claim the same row, and nothing needs locking. Renewal needs no row
 * locks either (`renewWith`).
 */
export const claimSqlite: ClaimBackend = {
  lockDue: (due) => due,
  heads,
  // Either kind of `due` is put in parentheses as it is compiled (a raw one brings its own).
  take: ({ leases, table, values }, due) =>
    leases
      .updateTable(table)
      .set(values)
      .where(sql<boolean>`id IN ${due}`)
      .returningAll(),
};

/**
 * Each project's oldest due rows, for a claim in turns. The CROSS JOIN keeps the projects the
 * outer loop (SQLite never reorders it), so the correlated list is read once per project, from
 * its range of the projects' due index (migration 019).
 */
function heads({ table, queue, claim }: ClaimParts) {
  const rows = sql.table(table);
  return sql<HeadRow>`SELECT n.id, n.project_id, n.run_at FROM queued_projects p CROSS JOIN ${rows} n
    WHERE ${projectsClaimed(claim)} AND n.id IN (
      SELECT m.id FROM ${rows} m
      WHERE m.project_id = p.id AND m.state = ${queue.ready} AND m.run_at <= ${claim.now}
      ORDER BY m.run_at LIMIT ${claim.limit})`;
}
