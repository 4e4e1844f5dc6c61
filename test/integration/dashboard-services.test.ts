import { spawn } from 'node:child_process';
import { addUsage, foldUsage } from '../../src/storage/usage.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminService } from '../../src/services/admins.js';
import { AcceptService } from '../../src/services/accept.js';
import { UsageService } from '../../src/services/usage.js';
import { createTestContext, seedProject, testEnv, type TestContext } from '../helpers/services.js';
import { HERALD_CLI } from '../helpers/processes.js';
import { waitUntil } from '../helpers/wait.js';

/** The services the dashboard adds (admins, usage) and `herald admin create`, on each backend. */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('UsageService', () => {
  it('counts messages per hour or UTC day by status, with quota use and last activity', async () => {
    const { projectId } = await seedProject(ctx.services, { quotaLimit: 100 });
    const project = await ctx.services.projects.resolve(projectId);
    const now = Date.UTC(2030, 4, 15, 12, 30);
    const at = async (ms: number, template: string) => {
      const service = new AcceptService(ctx.services.storage, () => ms);
      const outcome = await service.accept({
        project,
        sends: { template, to: { address: 'a@example.org' }, data: {}, type: 'email', sendAt: null },
      });
      expect(outcome.kind).toBe('accepted');
    };
    // Two days ago (2 accepted), yesterday (1), today at 10:xx (1) and 12:xx (1).
    await at(now - 2 * DAY, 'user_created');
    await at(now - 2 * DAY + HOUR, 'user_created');
    await at(now - DAY, 'user_created');
    await at(now - 2 * HOUR, 'user_created');
    await at(now - 5 * 60_000, 'user_created');
    // States are set directly, with the usage changes the worker records beside them: this test
    // is about counting, not delivery (delivery.test.ts checks the worker keeps them).
    const rows = await ctx.services.notifications.list({ projectId, limit: 10 });
    const sorted = [...rows].sort((a, b) => a.id - b.id);
    const finish = async (row: (typeof rows)[number], state: 'sent' | 'failed') => {
      await ctx.services.storage.db
        .updateTable('notifications')
        .set({ state })
        .where('id', '=', row.id)
        .execute();
      await addUsage(ctx.services.storage.db, [
        { projectId, createdAt: row.created_at, state: 'queued', delta: -1 },
        { projectId, createdAt: row.created_at, state, delta: 1 },
      ]);
    };
    for (const row of sorted.slice(0, 3)) await finish(row, 'sent');
    await finish(sorted[3]!, 'failed');
    // Half of the changes folded into the counters, half still pending: readers add both.
    await foldUsage(ctx.services.storage.db, 3);

    const usage = new UsageService(ctx.services.storage.db, () => now);
    const days = await usage.series(projectId, 'day', 3);
    expect(days.buckets.map((b) => [b.start, b.sent, b.failed, b.queued])).toEqual([
      [Date.UTC(2030, 4, 13), 2, 0, 0],
      [Date.UTC(2030, 4, 14), 1, 0, 0],
      [Date.UTC(2030, 4, 15), 0, 1, 1],
    ]);
    expect(days.totals).toEqual({ sent: 3, failed: 1, queued: 1 });
    const hours = await usage.series(projectId, 'hour', 3);
    expect(hours.buckets.map((b) => b.failed + b.queued + b.sent)).toEqual([1, 0, 1]);
    expect(await usage.totals(projectId)).toEqual({ sent: 3, failed: 1, queued: 1 });
    await foldUsage(ctx.services.storage.db);
    expect(await usage.totals(projectId)).toEqual({ sent: 3, failed: 1, queued: 1 });
    expect(await ctx.services.storage.db.selectFrom('usage_deltas').selectAll().execute()).toEqual([]);

    const view = await usage.forProject(await ctx.services.projects.get(projectId));
    expect(view.lastActivity).toBe(now - 5 * 60_000);
    // The May window: all five accepts of this month counted against 100.
    expect(view.quota).toMatchObject({
      limit: 100,
      used: 5,
      remaining: 95,
      windowStart: Date.UTC(2030, 4, 1),
    });
  });
});

describe('AdminService', () => {
  it('creates exactly one first admin when two setup links are used at once', async () => {
    const admins = new AdminService(ctx.services.storage.db);
    const [a, b] = [await admins.createSetupToken(), await admins.createSetupToken()];
    const results = await Promise.allSettled([
      admins.completeSetup(a, 'one@herald.example', 'password number one'),
      admins.completeSetup(b, 'two@herald.example', 'password number two'),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(await admins.list()).toHaveLength(1);
    expect(await admins.isSetupTokenValid(a)).toBe(false);
    expect(await admins.isSetupTokenValid(b)).toBe(false);
  });

  it('authenticates by email in any case and refuses short passwords', async () => {
    const admins = new AdminService(ctx.services.storage.db);
    const created = await admins.create('Case@Herald.Example', 'ten chars!');
    expect(created.email).toBe('case@herald.example');
    expect(await admins.authenticate('CASE@herald.example', 'ten chars!')).toMatchObject({ id: created.id });
    expect(await admins.authenticate('case@herald.example', 'ten chars?')).toBeNull();
    expect(await admins.authenticate('nobody@herald.example', 'ten chars!')).toBeNull();
    // An internationalised domain is stored in its ASCII form and found by either spelling.
    const idn = await admins.create('ops@Bücher.example', 'ten chars!');
    expect(idn.email).toBe('ops@xn--bcher-kva.example');
    for (const typed of ['ops@bücher.example', ' OPS@xn--bcher-kva.example ', '<ops@bücher.example>'])
      expect(await admins.authenticate(typed, 'ten chars!'), typed).toMatchObject({ id: idn.id });
    await expect(admins.create('short@herald.example', 'too short')).rejects.toThrow(/at least|10/);
    await expect(admins.create('case@herald.example', 'another password')).rejects.toThrow(/already exists/);
  });

  it('removes an admin and its sessions at once, never the last one, even when two removals race', async () => {
    const own = await createTestContext();
    try {
      const admins = new AdminService(own.services.storage.db);
      const first = await admins.create('first@herald.example', 'password number one');
      await admins.create('second@herald.example', 'password number two');
      const session = await admins.startSession(first);
      expect(await admins.session(session.token)).not.toBeNull();

      expect(await admins.remove(' FIRST@herald.example ')).toMatchObject({ email: 'first@herald.example' });
      expect(await admins.session(session.token)).toBeNull();
      expect(await admins.authenticate('first@herald.example', 'password number one')).toBeNull();
      await expect(admins.remove('first@herald.example')).rejects.toThrow(
        'No admin with email first@herald.example',
      );
      await expect(admins.remove('second@herald.example')).rejects.toThrow(/only admin/);
      expect((await admins.list()).map((a) => a.email)).toEqual(['second@herald.example']);

      // The last two removed at once: one of them stays. (Concurrent reads first, so that on
      // PostgreSQL both removals find an open connection and really run side by side.)
      await admins.create('third@herald.example', 'password number three');
      await Promise.all([admins.list(), admins.list(), admins.list(), admins.list()]);
      const results = await Promise.allSettled([
        admins.remove('second@herald.example'),
        admins.remove('third@herald.example'),
      ]);
      expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      expect(await admins.list()).toHaveLength(1);
    } finally {
      await own.close();
    }
  });
});

describe('herald admin create and delete', () => {
  it('reads the password from stdin and prints one JSON object', { timeout: 60_000 }, async () => {
    const env = testEnv(ctx.database);
    const run = (args: string[], input: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [...HERALD_CLI, ...args], {
          env: { ...process.env, ...env },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stdout, stderr }));
        child.stdin.end(input);
      });
    const created = await run(
      ['admin', 'create', '--email', 'cli@herald.example', '--password-stdin', '--json'],
      'from the command line\n',
    );
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const lines = created.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ email: 'cli@herald.example', id: expect.any(Number) });
    // The trailing newline is not part of the password.
    const admins = new AdminService(ctx.services.storage.db);
    await waitUntil(async () =>
      (await admins.authenticate('cli@herald.example', 'from the command line')) ? true : undefined,
    );

    const refused = await run(['admin', 'create', '--email', 'nostdin@herald.example', '--json'], '');
    expect(refused.code).not.toBe(0);
    expect(JSON.parse(refused.stderr.trim())).toEqual({
      error: 'pass the password on stdin with --password-stdin',
    });

    const deleted = await run(['admin', 'delete', '--email', 'cli@herald.example', '--json'], '');
    expect(deleted.stderr).toBe('');
    expect(JSON.parse(deleted.stdout.trim())).toMatchObject({ email: 'cli@herald.example', deleted: true });
    expect(await admins.authenticate('cli@herald.example', 'from the command line')).toBeNull();
    const unknown = await run(['admin', 'delete', '--email', 'cli@herald.example', '--json'], '');
    expect(unknown.code).not.toBe(0);
    expect(JSON.parse(unknown.stderr.trim())).toEqual({ error: 'No admin with email cli@herald.example' });
  });
});
