import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** What a reader may do with a report it is about to parse. */
export type ReportClaim =
  | { readonly kind: 'claimed' }
  /**
   * Read before: applied, or found to change nothing; its outcome then, who read it, and until
   * when that reader holds it to move it out of the mailbox.
   */
  | { readonly kind: 'done'; readonly outcome: string | null; readonly owner: string; readonly until: number }
  /** Another reader holds it and has time left. */
  | { readonly kind: 'held' };

/**
 * Claims a report for `owner` until `until`: a new fingerprint, one whose claim ran out (its
 * reader died), or one this owner holds already. Atomic on both backends: of two readers, one
 * inserts or takes it over, the other sees it held.
 */
export async function claimReport(
  db: Kysely<Database>,
  fingerprint: string,
  owner: string,
  now: number,
  until: number,
): Promise<ReportClaim> {
  const inserted = await db
    .insertInto('inbound_reports')
    .values({ fingerprint, state: 'claimed', owner, claimed_until: until, outcome: null, created_at: now })
    .onConflict((oc) => oc.column('fingerprint').doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return { kind: 'claimed' };
  const taken = await db
    .updateTable('inbound_reports')
    .set({ owner, claimed_until: until })
    .where('fingerprint', '=', fingerprint)
    .where('state', '=', 'claimed')
    .where((eb) => eb.or([eb('owner', '=', owner), eb('claimed_until', '<', now)]))
    .executeTakeFirst();
  if (Number(taken.numUpdatedRows) > 0) return { kind: 'claimed' };
  const row = await db
    .selectFrom('inbound_reports')
    .select(['state', 'outcome', 'owner', 'claimed_until'])
    .where('fingerprint', '=', fingerprint)
    .executeTakeFirst();
  // Gone between the two statements (pruned): the next look claims it.
  if (row === undefined || row.state === 'claimed') return { kind: 'held' };
  return { kind: 'done', outcome: row.outcome, owner: row.owner, until: Number(row.claimed_until) };
}

/**
 * Records a claimed report as done, in the caller's transaction (the one that applies it), held by
 * `owner` until `until` to move it out of the mailbox. False when `owner` no longer holds it:
 * another reader took it over, and may have applied it.
 */
export async function finishReport(
  tx: Kysely<Database>,
  fingerprint: string,
  owner: string,
  outcome: string,
  until: number,
): Promise<boolean> {
  const result = await tx
    .updateTable('inbound_reports')
    .set({ state: 'done', outcome, claimed_until: until })
    .where('fingerprint', '=', fingerprint)
    .where('owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Gives a claim back (reading failed), so the next reader need not wait for it to run out. */
export async function releaseReport(db: Kysely<Database>, fingerprint: string, owner: string): Promise<void> {
  await db
    .deleteFrom('inbound_reports')
    .where('fingerprint', '=', fingerprint)
    .where('owner', '=', owner)
    .where('state', '=', 'claimed')
    .execute();
}

/** Forgets reports read before `before` (the janitor). */
export async function pruneInboundReports(db: Kysely<Database>, before: number): Promise<number> {
  const result = await db.deleteFrom('inbound_reports').where('created_at', '<', before).executeTakeFirst();
  return Number(result.numDeletedRows);
}
