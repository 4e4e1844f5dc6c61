import { CompiledQuery, type Compilable, type Kysely, type QueryResult } from 'kysely';
import type { Database } from './schema.js';

const SLOT_PREFIX = '\u0000herald-slot:';

interface Compiled {
  readonly sql: string;
  /** Per parameter: the slot whose value it takes, or a constant the builder put there. */
  readonly parameters: readonly ({ readonly slot: string } | { readonly value: unknown })[];
}

/**
 * A statement Kysely builds once per dialect and Herald runs many times with new values. Building
 * a query (operation nodes, parsing, compiling) costs more than SQLite takes to run the small
 * statements on the delivery and accept paths: a tenth of a worker's time went to building two
 * statements per message. Here the query is built with a named slot in place of each value, the
 * compiled SQL is kept, and a run only binds the values (SQLite's driver keeps the prepared
 * statement by its text, see sqlite/statement-cache.ts).
 *
 * Only values may change between runs, never the shape: the builder must name the same columns
 * and clauses whatever the values will be, and give every slot a place.
 */
export class Precompiled<Names extends string> {
  /** By dialect adapter class: a process may hold stores of both backends (tests do). */
  private readonly compiled = new Map<unknown, Compiled>();

  constructor(
    private readonly slots: readonly Names[],
    private readonly build: (db: Kysely<Database>, slot: (name: Names) => never) => Compilable,
  ) {}

  run<Row = unknown>(
    db: Kysely<Database>,
    values: Readonly<Record<Names, unknown>>,
  ): Promise<QueryResult<Row>> {
    return this.runWith(db, (name) => values[name]);
  }

  /** Runs with each slot's value from `valueOf` (values from several places, without merging them first). */
  async runWith<Row = unknown>(
    db: Kysely<Database>,
    valueOf: (name: Names) => unknown,
  ): Promise<QueryResult<Row>> {
    const compiled = this.compile(db);
    const parameters = compiled.parameters.map((p) => ('slot' in p ? valueOf(p.slot as Names) : p.value));
    return db.executeQuery<Row>(CompiledQuery.raw(compiled.sql, parameters));
  }

  private compile(db: Kysely<Database>): Compiled {
    const dialect = db.getExecutor().adapter.constructor;
    let compiled = this.compiled.get(dialect);
    if (compiled !== undefined) return compiled;
    const query = this.build(db, (name) => `${SLOT_PREFIX}${name}` as never).compile();
    const used = new Set<string>();
    const parameters = query.parameters.map((value) => {
      if (typeof value !== 'string' || !value.startsWith(SLOT_PREFIX)) return { value };
      const slot = value.slice(SLOT_PREFIX.length);
      used.add(slot);
      return { slot };
    });
    const missing = this.slots.filter((name) => !used.has(name));
    if (missing.length > 0) throw new Error(`precompiled statement has no place for ${missing.join(', ')}`);
    compiled = { sql: query.sql, parameters };
    this.compiled.set(dialect, compiled);
    return compiled;
  }
}
