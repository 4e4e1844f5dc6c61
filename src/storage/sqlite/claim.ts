import type { ClaimStatement } from '../queue.js';

/**
 * SQLite has one writer at a time, so `UPDATE … WHERE id IN (SELECT … LIMIT n)` is atomic on its
 * own: no two workers can claim the same row. Renewal needs no row locks either (`renewWith`).
 */
export const claimSqlite: ClaimStatement = ({ leases, table, due, values }) =>
  leases.updateTable(table).set(values).where('id', 'in', due).returningAll();
