import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { POSTGRES_TYPES, renderMigrations, SQLITE_TYPES } from '../../src/storage/migrations.js';
import type { ColumnTypes } from '../../src/storage/migrations/columns.js';

/**
 * A released migration is never edited: databases already carry it by name, so its SQL must stay
 * what it was, byte for byte, however the code that writes it is arranged. The fixtures hold the
 * statements every released migration rendered for each backend when it was released.
 *
 * Releasing a new migration: `HERALD_MIGRATIONS=append npx vitest run --project unit
 * test/unit/migrations-frozen.test.ts` adds the migrations the fixtures do not hold yet; it never
 * rewrites one they hold.
 */

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/migrations');
/**
 * `-- <migration> #<n>` opens each statement; the statement follows exactly, then a blank line.
 * `#0` and a blank line stand for a migration with no statement on this backend.
 */
const HEADER = /^-- (\d{3}_[a-z0-9_]+) #(\d+)\n/gm;

type Rendered = Record<string, readonly string[]>;

function serialize(rendered: Rendered): string {
  return Object.entries(rendered)
    .flatMap(([name, list]) => list.map((statement, i) => `-- ${name} #${i + 1}\n${statement}\n\n`))
    .join('');
}

/** Migrations that render no statement on a backend still appear, so their names are kept. */
function serializeAll(rendered: Rendered): string {
  return Object.entries(rendered)
    .map(([name, list]) => (list.length === 0 ? `-- ${name} #0\n\n` : serialize({ [name]: list })))
    .join('');
}

function parse(text: string): Rendered {
  const out: Record<string, string[]> = {};
  const headers = [...text.matchAll(HEADER)];
  if (headers[0]?.index !== 0) throw new Error('a migrations fixture starts with a statement header');
  headers.forEach((header, i) => {
    const [line, name, n] = header as unknown as [string, string, string];
    const start = header.index + line.length;
    const end = headers[i + 1]?.index ?? text.length;
    const body = text.slice(start, end);
    const list = (out[name] ??= []);
    if (n === '0') {
      if (body !== '\n' || list.length > 0) throw new Error(`${name} #0: not a migration without statements`);
      return;
    }
    if (!body.endsWith('\n\n')) throw new Error(`${name} #${n}: not followed by a blank line`);
    if (Number(n) !== list.length + 1) throw new Error(`${name} #${n}: out of order`);
    list.push(body.slice(0, -2));
  });
  return out;
}

describe.each([
  ['sqlite', SQLITE_TYPES],
  ['postgres', POSTGRES_TYPES],
] as [string, ColumnTypes][])('released migrations on %s', (backend, types) => {
  const file = path.join(FIXTURES, `${backend}.sql.txt`);
  const current = renderMigrations(types);

  if (process.env.HERALD_MIGRATIONS === 'append') {
    mkdirSync(FIXTURES, { recursive: true });
    const held = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const known = held === '' ? {} : parse(held);
    const added = Object.fromEntries(Object.entries(current).filter(([name]) => !(name in known)));
    writeFileSync(file, held + serializeAll(added));
  }

  const released = parse(readFileSync(file, 'utf8'));

  it('the fixture reads back to the text it was read from', () => {
    expect(serializeAll(released)).toBe(readFileSync(file, 'utf8'));
  });

  it('every released migration is still there, in the same order', () => {
    const names = Object.keys(current);
    expect(names.slice(0, Object.keys(released).length)).toEqual(Object.keys(released));
  });

  it.each(Object.keys(released))('%s renders exactly the released SQL', (name) => {
    const now = current[name] ?? [];
    expect(now.length).toBe(released[name]!.length);
    now.forEach((statement, i) => expect(statement, `${name} statement ${i + 1}`).toBe(released[name]![i]));
  });
});
