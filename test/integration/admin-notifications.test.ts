import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { adminClient, ok, type AdminClient } from '../helpers/admin.js';
import { expectError } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { insertMetadata } from '../../src/storage/notification-metadata.js';
import { addNotification } from './storage-fixture.js';

/**
 * The delivery log over the management API (product.md §13): a project's notifications as status
 * bodies, newest first, filtered by status, recipient, template and time, in keyset pages.
 */

interface Page {
  notifications: { id: number; request_id: string; status: string; to: string; template: string }[];
  next_before: number | null;
}

let ctx: TestContext;
let admin: AdminClient;
let project: string;
const T0 = Date.UTC(2026, 5, 1, 12);
const ids: Record<string, number> = {};

beforeAll(async () => {
  ctx = await createTestContext();
  admin = await adminClient(ctx.app, ctx.services);
  const a = await seedProject(ctx.services);
  const b = await seedProject(ctx.services);
  project = a.name;
  const db = ctx.services.storage.db;
  const rows: [string, Parameters<typeof addNotification>[2]][] = [
    [
      'canceled-zed',
      {
        state: 'failed',
        template: 'bye',
        recipient: 'zed@example.org',
        created_at: T0 - 1000,
        error_message: 'Canceled',
      },
    ],
    ['welcome-jane', { state: 'sent', template: 'welcome', recipient: 'jane@example.org', created_at: T0 }],
    [
      'reset-jane',
      {
        state: 'failed',
        template: 'reset',
        recipient: 'jane@example.org',
        created_at: T0 + 1000,
        error_message: 'SMTP 550 5.1.1 no',
      },
    ],
    [
      'welcome-sam',
      { state: 'sent', template: 'welcome', recipient: 'Sam <sam_lee@shop.example>', created_at: T0 + 2000 },
    ],
    [
      'welcome-ann',
      { state: 'queued', template: 'welcome', recipient: 'ann@example.org', created_at: T0 + 3000 },
    ],
    [
      'reset-ann',
      { state: 'sending', template: 'reset', recipient: 'ann@example.org', created_at: T0 + 4000 },
    ],
  ];
  for (const [key, row] of rows) {
    ids[key] = await addNotification(db, a.projectId, row);
    // Another project's notification between each, never to be seen here.
    await addNotification(db, b.projectId, { ...row, recipient: 'other@example.org' });
  }
});
afterAll(() => ctx.close());

const search = async (query: string) =>
  ok<Page>(await admin.get(`/projects/${project}/notifications${query}`));
const found = (page: Page) => page.notifications.map((n) => n.id);

describe(`notification search (${backend})`, () => {
  it('lists the project’s notifications newest first as status bodies, another project’s never', async () => {
    const page = await search('');
    expect(found(page)).toEqual([
      ids['reset-ann'],
      ids['welcome-ann'],
      ids['welcome-sam'],
      ids['reset-jane'],
      ids['welcome-jane'],
      ids['canceled-zed'],
    ]);
    expect(page.next_before).toBeNull();
    expect(page.notifications[0]).toMatchObject({
      status: 'queued',
      template: 'reset',
      to: 'ann@example.org',
    });
    expect(page.notifications[3]).toMatchObject({ status: 'failed', error_message: 'SMTP 550 5.1.1 no' });
    const status = await ctx.services.notifications.status(
      (await ctx.services.projects.get(project)).id,
      page.notifications[2]!.request_id,
    );
    expect(page.notifications[2]).toEqual(JSON.parse(JSON.stringify(status)));
  });

  it('filters by status (queued includes what is being sent), recipient, template and time, together', async () => {
    expect(found(await search('?status=queued'))).toEqual([ids['reset-ann'], ids['welcome-ann']]);
    expect(found(await search('?status=sent'))).toEqual([ids['welcome-sam'], ids['welcome-jane']]);
    // A canceled message is failed to its sender, and found on its own as canceled.
    expect(found(await search('?status=failed'))).toEqual([ids['reset-jane'], ids['canceled-zed']]);
    expect(found(await search('?status=canceled'))).toEqual([ids['canceled-zed']]);
    expect(found(await search('?recipient=jane'))).toEqual([ids['reset-jane'], ids['welcome-jane']]);
    expect(found(await search('?recipient=%40shop.example'))).toEqual([ids['welcome-sam']]);
    // LIKE's wildcards in the search are the characters themselves.
    expect(found(await search('?recipient=sam_lee'))).toEqual([ids['welcome-sam']]);
    expect(found(await search('?recipient=_'))).toEqual([ids['welcome-sam']]);
    expect(found(await search('?recipient=%25'))).toEqual([]);
    expect(found(await search('?template=reset'))).toEqual([ids['reset-ann'], ids['reset-jane']]);
    expect(found(await search('?template=res'))).toEqual([]);
    const from = new Date(T0 + 1000).toISOString();
    const to = new Date(T0 + 3000).toISOString();
    expect(found(await search(`?from_date=${from}&to_date=${to}`))).toEqual([
      ids['welcome-sam'],
      ids['reset-jane'],
    ]);
    expect(found(await search(`?from_date=${encodeURIComponent('2026-06-01T14:00:02+02:00')}`))).toEqual([
      ids['reset-ann'],
      ids['welcome-ann'],
      ids['welcome-sam'],
    ]);
    expect(found(await search('?status=sent&template=welcome&recipient=jane'))).toEqual([
      ids['welcome-jane'],
    ]);
  });

  it('pages by next_before until it is null, each notification once', async () => {
    const seen: number[] = [];
    let before = '';
    for (let pages = 0; pages < 10; pages++) {
      const page = await search(`?limit=2${before}`);
      expect(page.notifications.length).toBeLessThanOrEqual(2);
      seen.push(...found(page));
      if (page.next_before === null) break;
      before = `&before=${page.next_before}`;
    }
    expect(seen).toEqual(found(await search('')));
    // Every id the error names as allowed is allowed: past the newest, everything.
    for (const before of ['99999999999', String(Number.MAX_SAFE_INTEGER)])
      expect(found(await search(`?before=${before}`))).toEqual(found(await search('')));
  });

  it('refuses what it cannot search by, naming the parameter', async () => {
    const cases: [string, string][] = [
      ['?status=sending', "Invalid 'status' (queued, sent, failed or canceled)"],
      ['?status=constructor', "Invalid 'status' (queued, sent, failed or canceled)"],
      ['?limit=0', "Invalid 'limit' (a whole number from 1 to 100)"],
      ['?limit=101', "Invalid 'limit' (a whole number from 1 to 100)"],
      ['?before=abc', `Invalid 'before' (a whole number from 1 to ${Number.MAX_SAFE_INTEGER})`],
      ['?before=9007199254740992', `Invalid 'before' (a whole number from 1 to ${Number.MAX_SAFE_INTEGER})`],
      ['?from_date=yesterday', "Invalid 'from_date' (an RFC 3339 time, e.g. 2026-12-01T09:00:00Z)"],
      ['?to_date=2026-06-01T12:00:00', "Invalid 'to_date' (an RFC 3339 time, e.g. 2026-12-01T09:00:00Z)"],
      [`?recipient=${'x'.repeat(321)}`, "Invalid 'recipient' (at most 320 characters)"],
      ['?recipient=a%00b', "Invalid 'recipient' (contains a NUL character)"],
      ['?sort=asc', "Unknown parameter 'sort'"],
    ];
    for (const [query, error] of cases)
      expectError(await admin.get(`/projects/${project}/notifications${query}`), 400, error);
  });

  it('finds the notifications carrying every metadata.KEY=VALUE, and refuses a filter none could carry', async () => {
    const db = ctx.services.storage.db;
    /** Gives a notification metadata as an accept stores it: on its row and as search rows. */
    const tag = async (id: number, metadata: Record<string, string>) => {
      const row = await db
        .updateTable('notifications')
        .set({ metadata: JSON.stringify(metadata) })
        .where('id', '=', id)
        .returning('project_id')
        .executeTakeFirstOrThrow();
      await insertMetadata(
        db,
        Object.entries(metadata).map(([key, value]) => ({
          notification_id: id,
          project_id: row.project_id,
          key,
          value,
        })),
      );
    };
    await tag(ids['welcome-jane']!, { plan: 'pro', order_id: '41' });
    await tag(ids['reset-jane']!, { plan: 'pro', order_id: '42' });
    await tag(ids['welcome-sam']!, { plan: 'free', order_id: '42' });
    // Another project's notification with the same values is never found here.
    await tag(ids['welcome-jane']! + 1, { plan: 'pro', order_id: '42' });

    expect(found(await search('?metadata.plan=pro'))).toEqual([ids['reset-jane'], ids['welcome-jane']]);
    expect(found(await search('?metadata.order_id=42&metadata.plan=pro'))).toEqual([ids['reset-jane']]);
    expect(found(await search('?status=sent&metadata.order_id=42'))).toEqual([ids['welcome-sam']]);
    expect(found(await search('?metadata.plan=team'))).toEqual([]);
    // A key that reads as an object's prototype is a key like any other: none carries it.
    expect(found(await search('?metadata.__proto__=pro'))).toEqual([]);
    expect(found(await search('?metadata.plan=pro&metadata.__proto__=x'))).toEqual([]);
    const page = await search('?metadata.order_id=41');
    expect(page.notifications[0]).toMatchObject({ metadata: { plan: 'pro', order_id: '41' } });
    for (const query of ['?metadata.=x', `?metadata.${'k'.repeat(41)}=x`, `?metadata.k=${'v'.repeat(501)}`])
      expectError(
        await admin.get(`/projects/${project}/notifications${query}`),
        400,
        "Invalid 'metadata' filter",
      );
  });

  it('finds an internationalised domain by its labels, however they are typed', async () => {
    const other = await seedProject(ctx.services);
    const id = await addNotification(ctx.services.storage.db, other.projectId, {
      state: 'sent',
      template: 'welcome',
      recipient: 'Jürgen <jurgen@xn--bcher-kva.example>',
      created_at: T0,
    });
    const inOther = async (recipient: string) =>
      found(
        ok<Page>(
          await admin.get(`/projects/${other.name}/notifications?recipient=${encodeURIComponent(recipient)}`),
        ),
      );
    for (const typed of [
      'jurgen@bücher.example',
      'bücher',
      '@BÜCHER.example',
      'xn--bcher-kva',
      'bücher。example',
    ])
      expect(await inOther(typed), typed).toEqual([id]);
    expect(await inOther('büch')).toEqual([]);
  });
});
