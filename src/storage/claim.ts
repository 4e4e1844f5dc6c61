import { sql, type Expression, type Kysely, type RawBuilder } from 'kysely';
import {
  leaseDb,
  LEASED,
  type IdQuery,
  type LeaseDatabase,
  type Queue,
  type QueueRows,
  type QueueTable,
} from './queue.js';
import type { Database } from './schema.js';

/**
 * How a worker takes due rows from a lease queue (queue.ts): which rows (the oldest due, or the
 * projects' oldest in turns), what is written to them, and in which order they are handed over.
 * A backend brings only what differs (`ClaimBackend`: sqlite/claim.ts, postgres/claim.ts).
 */

export interface ClaimRequest {
  readonly now: number;
  readonly owner: string;
  readonly leaseUntil: number;
  readonly limit: number;
  /** Projects whose lanes are full in this worker: their rows are left for later. */
  readonly excludeProjects?: readonly number[];
  /** Only rows of this webhook endpoint (the webhook queue claims per endpoint). */
  readonly endpointId?: number;
}

/**
 * The ids a claim takes: due ready rows, oldest due first, within the request's filters, locked
 * as the backend must (`ClaimBackend.lockDue`).
 */
function dueIds(db: Kysely<LeaseDatabase>, queue: Queue, claim: ClaimRequest): IdQuery {
  return db
    .selectFrom(queue.table)
    .select('id')
    .where('state', '=', queue.ready)
    .where('run_at', '<=', claim.now)
    .$if(claim.endpointId !== undefined, (qb) => qb.where('endpoint_id', '=', claim.endpointId!))
    .$if((claim.excludeProjects?.length ?? 0) > 0, (qb) =>
      qb.where('project_id', 'not in', claim.excludeProjects!),
    )
    .orderBy('run_at')
    .limit(claim.limit);
}

/**
 * The ids a claim in turns takes. The projects with queued rows are found first (`queued_projects`,
 * one look-up in their due index per project, however many projects exist or rows each has);
 * `heads`, a backend's own statement (`ClaimBackend.heads`), reads each one's oldest
 * due rows (`id`, `project_id`, `run_at`), at most `claim.limit` of each. Of those, the claim takes
 * every project's oldest, then every project's second, and so on, oldest due first within a turn:
 * a project that queued a thousand messages before another queued one shares the next claim with
 * it, and a project alone has the whole claim.
 */
function idsInTurns(
  queue: Queue,
  claim: ClaimRequest,
  heads: RawBuilder<HeadRow>,
): RawBuilder<{ id: number }> {
  const rows = sql.table(queue.table);
  return sql<{ id: number }>`WITH RECURSIVE queued_projects(id) AS (
    SELECT (SELECT project_id FROM ${rows} WHERE state = ${queue.ready} ORDER BY project_id LIMIT 1)
    UNION ALL
    SELECT (
      SELECT project_id FROM ${rows} WHERE state = ${queue.ready} AND project_id > queued_projects.id
      ORDER BY project_id LIMIT 1
    ) FROM queued_projects WHERE queued_projects.id IS NOT NULL
  )
  SELECT id FROM (
    SELECT id, run_at, row_number() OVER (PARTITION BY project_id ORDER BY run_at, id) AS turn
    FROM (${heads}) heads
  ) turns ORDER BY turn, run_at, id LIMIT ${claim.limit}`;
}

/** A row of a project's due head (`idsInTurns`). */
export interface HeadRow {
  id: number;
  project_id: number;
  run_at: number;
}

/**
 * Which of `queued_projects` (as `p` in a backend's `heads`) a claim in turns reads the due rows
 * of: all but those the request leaves out.
 */
export function projectsClaimed(claim: ClaimRequest): RawBuilder<boolean> {
  const left = claim.excludeProjects ?? [];
  return left.length === 0
    ? sql<boolean>`p.id IS NOT NULL`
    : sql<boolean>`p.id IS NOT NULL AND p.id NOT IN (${sql.join(left)})`;
}

/** What a claim writes to each row it takes: the lease, one more attempt, and the queue's resets. */
function claimedValues(queue: Queue, claim: ClaimRequest) {
  return {
    state: LEASED,
    lease_owner: claim.owner,
    lease_until: claim.leaseUntil,
    attempts: sql<number>`${sql.ref(`${queue.table}.attempts`)} + 1`,
    updated_at: claim.now,
    ...queue.claimResets,
  };
}

/** Claimed rows in the order they fell due. */
function byDueTime<Row extends { run_at: number; id: number }>(rows: Row[]): Row[] {
  return rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id);
}

/**
 * Rows claimed in turns, in the order of their turns (`idsInTurns`): every project's oldest, then
 * every project's second, and so on, so that the worker starts them in that order too.
 */
function byTurns<Row extends { run_at: number; id: number; project_id: number }>(rows: Row[]): Row[] {
  const taken = new Map<number, number>();
  const turns = byDueTime(rows).map((row) => {
    const turn = taken.get(row.project_id) ?? 0;
    taken.set(row.project_id, turn + 1);
    return { row, turn };
  });
  turns.sort((a, b) => a.turn - b.turn || a.row.run_at - b.row.run_at || a.row.id - b.row.id);
  return turns.map(({ row }) => row);
}

/** A claim's parts, for the statements a backend claims with. */
export interface ClaimParts {
  readonly leases: Kysely<LeaseDatabase>;
  /** Every queue is taken as any of them: they share the columns a claim touches. */
  readonly table: QueueTable;
  readonly queue: Queue;
  readonly claim: ClaimRequest;
  /** What to write to each row taken (`claimedValues`). */
  readonly values: ReturnType<typeof claimedValues>;
}

/** What a backend's claim differs by. */
export interface ClaimBackend {
  /** Locks the rows of a claim of the oldest due (`dueIds`) as they are picked, if it must. */
  lockDue(due: IdQuery): IdQuery;
  /** Each claimed project's oldest due rows, for a claim in turns (`idsInTurns`). */
  heads(parts: ClaimParts): RawBuilder<HeadRow>;
  /** The statement that marks the rows `due` picks with `parts.values` and returns them whole. */
  take(parts: ClaimParts, due: Expression<{ id: number }>): { execute(): Promise<unknown[]> };
}

/** Claims with a backend's statements: the rows taken, oldest due first (in turns, turn by turn). */
export async function claimWith<Table extends QueueTable>(
  db: Kysely<Database>,
  backend: ClaimBackend,
  queue: Queue<Table>,
  claim: ClaimRequest,
): Promise<QueueRows[Table][]> {
  const leases = leaseDb(db);
  const table: QueueTable = queue.table;
  const parts: ClaimParts = { leases, table, queue, claim, values: claimedValues(queue, claim) };
  // A raw statement is put in a query as it is written: it brings its own parentheses.
  const due: Expression<{ id: number }> = queue.inTurns
    ? sql<{ id: number }>`(${idsInTurns(queue, claim, backend.heads(parts))})`
    : backend.lockDue(dueIds(leases, queue, claim));
  const claimed = (await backend.take(parts, due).execute()) as QueueRows[Table][];
  return queue.inTurns ? byTurns(claimed) : byDueTime(claimed);
}
