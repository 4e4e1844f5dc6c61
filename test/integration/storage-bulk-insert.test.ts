import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertRows } from '../../src/storage/bulk-insert.js';
import type { NewNotificationRow } from '../../src/storage/schema.js';
import {
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * Multi-row inserts whose SQL is compiled once per row count: each value lands in its own row and
 * column however the rows order their keys, across repeated and different counts, and rows that
 * name different columns are inserted as written.
 */
let fx: StorageFixture;
let projectId: number;
beforeAll(async () => {
  fx = await openTestStorage();
  projectId = await addProject(fx.db);
});
afterAll(() => fx?.close());

function row(i: number, overrides: Partial<NewNotificationRow> = {}): NewNotificationRow {
  return {
    request_id: randomUUID(),
    project_id: projectId,
    template: `template-${i}`,
    recipient: `user${i}@example.org`,
    data: JSON.stringify({ i, name: 'Zoë “quoted” \u2028' }),
    type: 'email',
    state: 'queued',
    attempts: i % 3,
    run_at: 1_000 + i,
    send_at: i % 2 === 0 ? null : 2_000 + i,
    locale: i % 2 === 0 ? 'fr' : null,
    created_at: 10_000 + i,
    updated_at: 20_000 + i,
    ...overrides,
  };
}

async function insertAndCheck(rows: readonly NewNotificationRow[]): Promise<void> {
  const inserted = await insertRows<{ id: number; request_id: string }>(fx.db, 'notifications', rows, [
    'id',
    'request_id',
  ]);
  expect(inserted).toHaveLength(rows.length);
  const ids = new Map(inserted.map((r) => [r.request_id, Number(r.id)]));
  for (const sent of rows) {
    const stored = await notification(fx.db, ids.get(sent.request_id)!);
    for (const [column, value] of Object.entries(sent))
      if (value !== undefined)
        expect([column, stored[column as keyof typeof stored]]).toEqual([column, value]);
  }
}

describe(`bulk inserts (${backend})`, () => {
  it('puts every value in its row and column, for one row and for many, again and again', async () => {
    for (const count of [1, 7, 7, 500, 1, 500])
      await insertAndCheck(Array.from({ length: count }, (_, i) => row(i)));
  });

  it('reads each row by column name, whatever order its keys come in', async () => {
    const first = row(1);
    const reversed = Object.fromEntries(Object.entries(row(2)).reverse()) as unknown as NewNotificationRow;
    await insertAndCheck([first, reversed, row(3)]);
  });

  it('inserts rows that name different columns as written, the missing ones left to the table', async () => {
    const without = row(4);
    delete (without as { locale?: unknown }).locale;
    const undefinedLocale = row(5, { locale: undefined });
    const rows = [row(6, { locale: 'de' }), without, undefinedLocale];
    const inserted = await insertRows<{ id: number; request_id: string }>(fx.db, 'notifications', rows, [
      'id',
      'request_id',
    ]);
    const locales = new Map<string, string | null>();
    for (const r of inserted) locales.set(r.request_id, (await notification(fx.db, Number(r.id))).locale);
    expect(rows.map((r) => locales.get(r.request_id))).toEqual(['de', null, null]);
  });

  it('writes an expression into the statement, as Kysely does, instead of binding it as a value', async () => {
    const rows = [row(9), row(10, { template: sql<string>`${'tem'} || ${'plate-x'}` as unknown as string })];
    const inserted = await insertRows<{ id: number; request_id: string }>(fx.db, 'notifications', rows, [
      'id',
      'request_id',
    ]);
    const templates = new Map<string, string>();
    for (const r of inserted) templates.set(r.request_id, (await notification(fx.db, Number(r.id))).template);
    expect(rows.map((r) => templates.get(r.request_id))).toEqual(['template-9', 'template-x']);
  });

  it('inserts all of the rows or none: a row refused late leaves none of the others behind', async () => {
    const entry = (i: number) => ({
      created_at: 1_000 + i,
      method: i === 600 ? null : 'POST',
      path: `/api/v1/bulk-insert-${i}`,
      status_code: 202,
      error: null,
      latency_ms: 1.5,
      key_prefix: null,
      project_id: null,
      request_id: null,
    });
    const entries = Array.from({ length: 700 }, (_, i) => entry(i));
    await expect(insertRows(fx.db, 'api_logs', entries)).rejects.toThrow();
    const left = await fx.db
      .selectFrom('api_logs')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('path', 'like', '/api/v1/bulk-insert-%')
      .executeTakeFirstOrThrow();
    expect(Number(left.count)).toBe(0);
    entries[600]!.method = 'POST';
    await insertRows(fx.db, 'api_logs', entries);
    const stored = await fx.db
      .selectFrom('api_logs')
      .select(['created_at', 'path'])
      .where('path', 'like', '/api/v1/bulk-insert-%')
      .orderBy('created_at')
      .execute();
    expect(stored.map((r) => [Number(r.created_at), r.path])).toEqual(
      entries.map((e) => [e.created_at, e.path]),
    );
  });

  it('returns nothing asked for when no column is named to return', async () => {
    expect(await insertRows(fx.db, 'notifications', [row(8)])).toEqual([]);
    expect(await insertRows(fx.db, 'notifications', [])).toEqual([]);
  });
});
