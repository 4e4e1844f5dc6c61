import type { Kysely } from 'kysely';
import { suppressionKey, type SuppressionReason } from '../domain/suppression.js';
import type { Database, NotificationRow } from '../storage/schema.js';
import { suppressedAmong } from '../storage/suppressions.js';

/**
 * Why each claimed row's recipient is on its project's suppression list, by row id (rows whose
 * recipient is not are left out): one query for the whole claim, so checking costs nothing per
 * message.
 */
export async function suppressionsOf(
  db: Kysely<Database>,
  rows: readonly NotificationRow[],
): Promise<Map<number, SuppressionReason>> {
  const keys = rows.map((row) => suppressionKey(row.recipient));
  const found = await suppressedAmong(
    db,
    rows.flatMap((row, i) => (keys[i] === null ? [] : [{ projectId: row.project_id, email: keys[i]! }])),
  );
  const reasons = new Map<number, SuppressionReason>();
  rows.forEach((row, i) => {
    const reason = keys[i] === null ? undefined : found.get(`${row.project_id}\n${keys[i]}`);
    if (reason !== undefined) reasons.set(row.id, reason);
  });
  return reasons;
}
