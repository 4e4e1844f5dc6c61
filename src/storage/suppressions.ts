import type { Kysely } from 'kysely';
import type { Database, SuppressionReason, SuppressionRow } from './schema.js';
import { deleteRows, findRow } from './rows.js';

/** An entry to add; `email` is lowercased by the caller (domain/suppression.ts suppressionKey). */
export interface NewSuppression {
  readonly projectId: number;
  readonly email: string;
  readonly reason: SuppressionReason;
  readonly requestId: string | null;
  readonly detail: string | null;
  readonly now: number;
}

/** Adds entries; an address already on the list keeps its first entry. Returns how many were new. */
export async function addSuppressions(
  db: Kysely<Database>,
  entries: readonly NewSuppression[],
): Promise<number> {
  if (entries.length === 0) return 0;
  const result = await db
    .insertInto('suppressions')
    .values(
      entries.map((e) => ({
        project_id: e.projectId,
        email: e.email,
        reason: e.reason,
        created_at: e.now,
        request_id: e.requestId,
        detail: e.detail,
      })),
    )
    .onConflict((oc) => oc.columns(['project_id', 'email']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n);
}

export async function removeSuppression(
  db: Kysely<Database>,
  projectId: number,
  email: string,
): Promise<boolean> {
  return deleteRows(db, 'suppressions', { project_id: projectId, email });
}

export async function findSuppression(
  db: Kysely<Database>,
  projectId: number,
  email: string,
): Promise<SuppressionRow | undefined> {
  return findRow(db, 'suppressions', { project_id: projectId, email });
}

/** A project's list, newest first. */
export async function listSuppressions(
  db: Kysely<Database>,
  projectId: number,
  options: { readonly limit: number; readonly offset?: number },
): Promise<SuppressionRow[]> {
  return db
    .selectFrom('suppressions')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('created_at', 'desc')
    .orderBy('email')
    .limit(options.limit)
    .offset(options.offset ?? 0)
    .execute();
}

/**
 * The reasons the given (project, address) pairs are suppressed, keyed `projectId\naddress`: one
 * query for a claimed batch, so checking costs nothing per message.
 */
export async function suppressedAmong(
  db: Kysely<Database>,
  pairs: readonly { readonly projectId: number; readonly email: string }[],
): Promise<Map<string, SuppressionReason>> {
  const found = new Map<string, SuppressionReason>();
  if (pairs.length === 0) return found;
  const rows = await db
    .selectFrom('suppressions')
    .select(['project_id', 'email', 'reason'])
    .where('project_id', 'in', [...new Set(pairs.map((p) => p.projectId))])
    .where('email', 'in', [...new Set(pairs.map((p) => p.email))])
    .execute();
  for (const row of rows) found.set(`${row.project_id}\n${row.email}`, row.reason);
  return found;
}
