import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiLogService } from '../../src/services/api-log.js';
import { AuditLogService } from '../../src/services/audit-log.js';
import { insertAuditLog } from '../../src/storage/audit-log.js';
import { Janitor } from '../../src/services/janitor.js';
import { claimIdempotencyKey } from '../../src/storage/idempotency.js';
import { insertApiLogs } from '../../src/storage/api-logs.js';
import { insertFileChunks, linkFiles, readFiles } from '../../src/storage/notification-files.js';
import {
  addNotification,
  addProject,
  backend,
  notification,
  openTestStorage,
  type StorageFixture,
} from './storage-fixture.js';

/**
 * Housekeeping: API and audit logs past their age or row limit and expired Idempotency-Keys are
 * deleted.
 */
const DAY = 86_400_000;
const NOW = 1_700_000_000_000;

let fx: StorageFixture;
beforeAll(async () => {
  fx = await openTestStorage();
});
afterAll(() => fx?.close());

describe(`janitor (${backend})`, () => {
  it('deletes expired API logs and Idempotency-Keys and keeps the rest', async () => {
    const projectId = await addProject(fx.db);
    const logs = [NOW - 40 * DAY, NOW - 31 * DAY, NOW - 29 * DAY, NOW - 1].map((created_at) => ({
      created_at,
      method: 'GET',
      path: '/api/v1/notifications/x',
      status_code: 404,
      error: null,
      latency_ms: 1,
      key_prefix: null,
      project_id: projectId,
      request_id: null,
    }));
    await insertApiLogs(fx.db, logs);
    for (const [key, expiresAt] of [
      ['expired', NOW - 1],
      ['live', NOW + DAY],
    ] as const) {
      await claimIdempotencyKey(fx.db, { projectId, key, fingerprint: 'f', now: NOW - DAY, expiresAt });
    }
    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 10 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );

    expect(await janitor.runOnce(NOW)).toEqual({
      apiLogs: 2,
      auditLog: 0,
      idempotencyKeys: 1,
      contents: 0,
      files: 0,
      webhookEvents: 0,
      inboundReports: 0,
    });
    const kept = await fx.db.selectFrom('api_logs').select('created_at').orderBy('created_at').execute();
    expect(kept.map((row) => row.created_at)).toEqual([NOW - 29 * DAY, NOW - 1]);
    const keys = await fx.db.selectFrom('idempotency_keys').select('key').execute();
    expect(keys.map((row) => row.key)).toEqual(['live']);
    // A second pass finds nothing more to do.
    expect(await janitor.runOnce(NOW)).toEqual({
      apiLogs: 0,
      auditLog: 0,
      idempotencyKeys: 0,
      contents: 0,
      files: 0,
      webhookEvents: 0,
      inboundReports: 0,
    });
  });

  it('keeps at most maxRows API log entries, the last written', async () => {
    await fx.db.deleteFrom('api_logs').execute();
    const projectId = await addProject(fx.db);
    const rows = Array.from({ length: 7 }, (_, i) => ({
      created_at: NOW - 6 + i,
      method: 'POST',
      path: '/api/v1/notifications',
      status_code: 202,
      error: null,
      latency_ms: 1,
      key_prefix: 'hrl_abcd',
      project_id: projectId,
      request_id: null,
    }));
    await insertApiLogs(fx.db, rows);
    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 3 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );
    expect((await janitor.runOnce(NOW)).apiLogs).toBe(4);
    const kept = await fx.db
      .selectFrom('api_logs')
      .select('created_at')
      .orderBy('created_at', 'desc')
      .execute();
    expect(kept.map((row) => row.created_at)).toEqual([NOW, NOW - 1, NOW - 2]);
  });

  it('keeps the audit log as long as the API log: by age, then the newest maxRows', async () => {
    const logger = pino({ level: 'silent' });
    const entry = (created_at: number, path: string) => ({
      created_at,
      token_id: 1,
      token_name: 'ci',
      method: 'PUT',
      path,
      status_code: 200,
      error: null,
      project_id: null,
    });
    const audit = new AuditLogService(fx.db, logger);
    await insertAuditLog(fx.db, [
      entry(NOW - 31 * DAY, '/old'),
      ...[1, 2, 3, 4].map((i) => entry(NOW - 10 + i, `/recent/${i}`)),
    ]);
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 3 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
      undefined,
      undefined,
      audit,
    );
    expect((await janitor.runOnce(NOW)).auditLog).toBe(2);
    expect((await audit.list({ limit: 10 })).map((row) => row.path)).toEqual([
      '/recent/4',
      '/recent/3',
      '/recent/2',
    ]);
    expect((await janitor.runOnce(NOW)).auditLog).toBe(0);
  });

  it('erases the placeholder values and content of notifications finished before the retention, and nothing else', async () => {
    const projectId = await addProject(fx.db);
    const content = {
      data: JSON.stringify({ password: 'hunter2-secret' }),
      subject: 'Hi',
      text_body: 'Your password is hunter2-secret',
      html_body: '<p>hunter2-secret</p>',
    };
    const old = NOW - 31 * DAY;
    const ids = {
      oldSent: await addNotification(fx.db, projectId, { ...content, state: 'sent', updated_at: old }),
      oldFailed: await addNotification(fx.db, projectId, { ...content, state: 'failed', updated_at: old }),
      oldQueued: await addNotification(fx.db, projectId, { ...content, state: 'queued', updated_at: old }),
      recentSent: await addNotification(fx.db, projectId, {
        ...content,
        state: 'sent',
        updated_at: NOW - DAY,
      }),
    };
    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 1000 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );
    expect((await janitor.runOnce(NOW)).contents).toBe(2);
    for (const id of [ids.oldSent, ids.oldFailed]) {
      expect(await notification(fx.db, id)).toMatchObject({
        data: '{}',
        subject: null,
        text_body: null,
        html_body: null,
        content_erased_at: NOW,
      });
    }
    for (const id of [ids.oldQueued, ids.recentSent])
      expect(await notification(fx.db, id)).toMatchObject({ ...content, content_erased_at: null });
    expect((await janitor.runOnce(NOW)).contents).toBe(0);
  });

  it("erases the files' bytes with the content and keeps their list; files of messages still kept stay", async () => {
    const projectId = await addProject(fx.db);
    const old = NOW - 31 * DAY;
    const listing = JSON.stringify([{ filename: 'a.pdf', content_type: 'application/pdf', size: 3 }]);
    const add = async (overrides: Parameters<typeof addNotification>[2], files: number) => {
      const id = await addNotification(fx.db, projectId, { attachments: listing, ...overrides });
      for (let position = 0; position < files; position++) {
        const bytes = Buffer.from(`secret ${position}`);
        const [contentId] = await insertFileChunks(
          fx.db,
          [{ contentId: null, size: bytes.length, seq: 0, bytes }],
          NOW - 2 * DAY,
        );
        await linkFiles(fx.db, [{ notification_id: id, position, content_id: contentId! }]);
      }
      return id;
    };
    // More files than one lookup takes, so the pass goes on until none is left.
    const oldSent = await add({ state: 'sent', updated_at: old }, 10);
    const oldFailed = await add({ state: 'failed', updated_at: old }, 10);
    const oldQueued = await add({ state: 'queued', updated_at: old }, 2);
    const recent = await add({ state: 'sent', updated_at: NOW - DAY }, 1);
    // Bytes no accept linked: swept once they are an hour old, not before.
    const unlinked = (text: string, at: number) =>
      insertFileChunks(fx.db, [{ contentId: null, size: text.length, seq: 0, bytes: Buffer.from(text) }], at);
    const [unlinkedOld] = await unlinked('orphan', NOW - 3_600_001);
    const [unlinkedNew] = await unlinked('in flight', NOW - 60_000);
    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 1000 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );
    const pass = await janitor.runOnce(NOW);
    expect(pass).toMatchObject({ contents: 2, files: 21 });
    const left = await fx.db.selectFrom('file_contents').select('id').execute();
    expect(left.map((row) => Number(row.id))).not.toContain(unlinkedOld);
    expect(left.map((row) => Number(row.id))).toContain(unlinkedNew);
    // The links went with the bytes.
    expect(
      await fx.db
        .selectFrom('notification_files')
        .selectAll()
        .where('notification_id', '=', oldSent)
        .execute(),
    ).toEqual([]);
    for (const id of [oldSent, oldFailed]) {
      expect(await readFiles(fx.db, id)).toEqual([]);
      expect(await notification(fx.db, id)).toMatchObject({ attachments: listing, content_erased_at: NOW });
    }
    expect((await readFiles(fx.db, oldQueued))?.map(String)).toEqual(['secret 0', 'secret 1']);
    expect((await readFiles(fx.db, recent))?.map(String)).toEqual(['secret 0']);
    expect((await janitor.runOnce(NOW)).files).toBe(0);
  });

  it('deletes webhook events past their retention once every delivery has finished, with their attempts', async () => {
    const projectId = await addProject(fx.db);
    const endpoint = await fx.db
      .insertInto('webhook_endpoints')
      .values({
        project_id: projectId,
        url: 'https://x.example/h',
        events: null,
        secret_enc: 'v1:x',
        enabled: 1,
        created_at: 0,
        updated_at: 0,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const old = NOW - 31 * DAY;
    const event = async (createdAt: number, state: 'pending' | 'succeeded' | 'failed') => {
      const row = await fx.db
        .insertInto('webhook_events')
        .values({
          project_id: projectId,
          notification_id: null,
          webhook_id: `msg_${createdAt}_${state}`,
          type: 'notification.sent',
          payload: '{}',
          created_at: createdAt,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const delivery = await fx.db
        .insertInto('webhook_deliveries')
        .values({
          event_id: row.id,
          endpoint_id: endpoint.id,
          project_id: projectId,
          state,
          attempts: 1,
          run_at: createdAt,
          created_at: createdAt,
          updated_at: createdAt,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await fx.db
        .insertInto('webhook_attempts')
        .values({
          delivery_id: delivery.id,
          attempt: 1,
          started_at: createdAt,
          latency_ms: 1,
          status_code: 200,
          excerpt: 'ok',
          error: null,
        })
        .execute();
      return row.id;
    };
    const ids = {
      oldSucceeded: await event(old, 'succeeded'),
      oldFailed: await event(old + 1, 'failed'),
      oldPending: await event(old + 2, 'pending'),
      recent: await event(NOW - DAY, 'succeeded'),
    };
    const logger = pino({ level: 'silent' });
    const janitor = new Janitor(
      fx.db,
      new ApiLogService(fx.db, logger),
      {
        apiLog: { retentionDays: 30, maxRows: 1000 },
        contentRetentionDays: 30,
        webhooks: { retentionDays: 30 },
      },
      logger,
    );
    expect((await janitor.runOnce(NOW)).webhookEvents).toBe(2);
    const left = await fx.db
      .selectFrom('webhook_events')
      .select('id')
      .where('project_id', '=', projectId)
      .orderBy('id')
      .execute();
    expect(left.map((row) => row.id)).toEqual([ids.oldPending, ids.recent]);
    const deliveries = await fx.db
      .selectFrom('webhook_deliveries')
      .select('event_id')
      .where('project_id', '=', projectId)
      .execute();
    expect(deliveries.map((row) => row.event_id).sort()).toEqual([ids.oldPending, ids.recent].sort());
    const attempts = await fx.db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .select('d.event_id')
      .where('d.project_id', '=', projectId)
      .execute();
    expect(attempts).toHaveLength(2);
  });
});
