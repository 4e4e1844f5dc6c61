/**
 * What every migration is written with: the backend's column types, and the blocks that more
 * than one table spells alike.
 */

/** How each backend spells the schema: its column types, and which backend it is. */
export interface ColumnTypes {
  readonly dialect: 'sqlite' | 'postgres';
  /** An auto-assigned 64-bit primary key. */
  readonly id: string;
  /** A 64-bit integer: ids, counts and epoch-millisecond timestamps. */
  readonly bigint: string;
  /** A double-precision float. */
  readonly real: string;
  /** Bytes, stored as they are. */
  readonly blob: string;
}

/** A migration: its statements, rendered for one backend. */
export type Ddl = (t: ColumnTypes) => readonly string[];

/**
 * Blocks that more than one table spells alike, written once so those tables cannot drift apart.
 * Column blocks render their lines as the CREATE TABLE statements below indent their columns, with
 * no comma after the last. Released migrations use them, so what they render is frozen too:
 * test/unit/migrations-frozen.test.ts compares every released statement with its fixture.
 */
const NEXT_COLUMN = ',\n      ';

/** When a row was created and last changed, in epoch milliseconds. */
export const timestamps = (t: ColumnTypes) =>
  [`created_at ${t.bigint} NOT NULL`, `updated_at ${t.bigint} NOT NULL`].join(NEXT_COLUMN);

/** A job claimed under a lease (notifications, webhook deliveries): what the claim and the reaper read. */
export const leaseColumns = (t: ColumnTypes) =>
  [
    'state TEXT NOT NULL',
    'attempts INTEGER NOT NULL DEFAULT 0',
    `run_at ${t.bigint} NOT NULL`,
    `lease_until ${t.bigint}`,
    'lease_owner TEXT',
  ].join(NEXT_COLUMN);

/**
 * The claim's index (due rows: those waiting in `waiting`) and the lease reaper's (rows being
 * sent), both partial, so neither grows with the finished rows that pile up.
 */
export const leaseIndexes = (table: string, due: string, waiting: string) => [
  `CREATE INDEX ${table}_due ON ${table} (${due}) WHERE state = '${waiting}'`,
  `CREATE INDEX ${table}_leased ON ${table} (lease_until) WHERE state = 'sending'`,
];

/** The head of one attempt's log row: the leased row it belongs to (and goes with), its number, its start. */
export const attemptColumns = (t: ColumnTypes, column: string, leased: string) =>
  [
    `id ${t.id}`,
    `${column} ${t.bigint} NOT NULL REFERENCES ${leased}(id) ON DELETE CASCADE`,
    'attempt INTEGER NOT NULL',
    `started_at ${t.bigint} NOT NULL`,
  ].join(NEXT_COLUMN);
