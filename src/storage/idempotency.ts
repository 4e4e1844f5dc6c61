import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Database } from './schema.js';

export interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly response: string | null;
  readonly responseStatus: number | null;
}

/** A project's Idempotency-Key: keys are the caller's own, so the same key in two projects is two records. */
function keyOf(projectId: number, key: string) {
  return (eb: ExpressionBuilder<Database, 'idempotency_keys'>) => eb.and({ project_id: projectId, key });
}

/**
 * Claims an Idempotency-Key for a request, or returns the record that already holds it. An expired
 * record is taken over in the same statement. On PostgreSQL a concurrent claim of the same key
 * waits for the first transaction and then sees its committed record.
 */
export async function claimIdempotencyKey(
  db: Kysely<Database>,
  claim: { projectId: number; key: string; fingerprint: string; now: number; expiresAt: number },
): Promise<{ claimed: true } | { claimed: false; existing: IdempotencyRecord }> {
  const inserted = await db
    .insertInto('idempotency_keys')
    .values({
      project_id: claim.projectId,
      key: claim.key,
      fingerprint: claim.fingerprint,
      response: null,
      response_status: null,
      created_at: claim.now,
      expires_at: claim.expiresAt,
    })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'key'])
        .doUpdateSet({
          fingerprint: claim.fingerprint,
          response: null,
          response_status: null,
          created_at: claim.now,
          expires_at: claim.expiresAt,
        })
        .where('idempotency_keys.expires_at', '<=', claim.now),
    )
    .returning('key')
    .executeTakeFirst();
  if (inserted !== undefined) return { claimed: true };
  const row = await db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'response', 'response_status'])
    .where(keyOf(claim.projectId, claim.key))
    .executeTakeFirstOrThrow();
  return {
    claimed: false,
    existing: { fingerprint: row.fingerprint, response: row.response, responseStatus: row.response_status },
  };
}

export async function completeIdempotencyKey(
  db: Kysely<Database>,
  projectId: number,
  key: string,
  status: number,
  response: string,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ response, response_status: status })
    .where(keyOf(projectId, key))
    .execute();
}

export async function releaseIdempotencyKey(
  db: Kysely<Database>,
  projectId: number,
  key: string,
): Promise<void> {
  await db.deleteFrom('idempotency_keys').where(keyOf(projectId, key)).execute();
}

export async function pruneIdempotencyKeys(db: Kysely<Database>, now: number): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
