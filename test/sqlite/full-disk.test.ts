import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteDatabase as BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { httpRequest, ProcessGroup } from '../helpers/processes.js';
import { TEST_SECRET } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { skipSuite } from '../suites.js';

/**
 * A real `herald serve` whose data directory is on a small tmpfs that fills up while mail is in
 * flight: the relay accepts every message, but no outcome can be recorded, no lease renewed and no
 * heartbeat written until the disk is freed. Only a crash may send a message twice
 * (docs/security.md), so each message must reach the relay exactly once and end `sent`.
 */

const SUITE = 'full disk (tmpfs)';
const MESSAGES = 30;
/** Short, so the leases run out while the disk is full. */
const LEASE_MS = 2_000;

let mountPoint: string | null = null;
let unavailable: string | null = null;

function mountTmpfs(): void {
  if (process.getuid?.() !== 0) {
    unavailable = 'needs root to mount a tmpfs';
    return;
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-full-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m,mode=0700', 'tmpfs', dir], { stdio: 'pipe' });
    mountPoint = dir;
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    unavailable = `mounting a tmpfs failed (${String((error as Error).message).split('\n')[0]})`;
  }
}

/** Writes a file until the filesystem has no byte left; returns its path. */
function fillDisk(dir: string): string {
  const file = path.join(dir, 'filler');
  // Appends: a second fill takes only what was freed since the first.
  const fd = openSync(file, 'a');
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x55);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return file;
}

const group = new ProcessGroup();
let sink: SmtpSink;
let services: Services | null = null;
let env: Record<string, string>;

beforeAll(async () => {
  mountTmpfs();
  if (mountPoint === null) return;
  sink = await new SmtpSink().start();
  env = {
    HERALD_DATA_DIR: mountPoint,
    HERALD_SECRET_KEY: TEST_SECRET,
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_SMTP_URL: sink.url,
    HERALD_DELIVERY_LEASE_MS: String(LEASE_MS),
    HERALD_DELIVERY_POLL_MS: '50',
    HERALD_DELIVERY_RETRY_BASE_MS: '600000',
  };
  services = await openServices(loadConfig({ ...env, HERALD_LOG_LEVEL: 'silent' }), createLogger('silent'));
});

afterAll(async () => {
  await group.killAll();
  if (services !== null) await closeServices(services);
  await sink?.stop();
  if (mountPoint !== null) {
    execFileSync('umount', [mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  }
});

describe('a full disk while mail is in flight', () => {
  it('sends each message exactly once and records it sent once the disk is freed', async (context) => {
    if (mountPoint === null || services === null) return skipSuite(context, SUITE, unavailable ?? 'no tmpfs');
    const dataDir = mountPoint;
    const { project, apiKey } = await services.projects.create({
      name: 'full-disk',
      fromEmail: 'noreply@disk.example',
    });
    await services.templates.create(project.id, {
      name: 'welcome',
      subject: 'Hi {{n}}',
      text: 'Message {{n}}',
    });

    sink.hold();
    // Two worker processes on the same database (role all, and a second worker), as on one host.
    const { proc, url } = await group.http('all', 'all', env);
    const second = await group.worker('worker', { ...env, HERALD_LOG_LEVEL: 'info' });
    const ids: string[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      const reply = await httpRequest(`${url}/api/v1/notifications`, {
        headers: { authorization: `Bearer ${apiKey}` },
        body: { template: 'welcome', to: `user${i}@example.org`, data: { n: String(i) } },
      });
      expect(reply.status).toBe(202);
      ids.push((JSON.parse(reply.body) as { request_id: string }).request_id);
    }
    // The relay's window of them is in SMTP transactions, held; more are claimed and parked.
    let inFlight = 0;
    await waitUntil(
      async () => {
        const { sending } = await services!.notifications.counts(project.id);
        if (sink.waiting === 0 || sending === 0 || sink.waiting !== inFlight) {
          inFlight = sink.waiting;
          return undefined;
        }
        return true;
      },
      { intervalMs: 500, what: 'messages claimed and in SMTP transactions' },
    );

    // The WAL is emptied, so the next commit must grow it; then not a byte is left. Commits made
    // while the disk fills can grow the WAL again, and a WAL with room is written over from its
    // start after a checkpoint, so writes would go on: it is emptied again and the space it freed
    // taken, until the disk is full and the WAL empty.
    const file = path.join(dataDir, 'herald.db');
    const walBytes = () => (existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0);
    let filler = '';
    for (let fills = 1; filler === '' || walBytes() > 0; fills++) {
      if (fills > 20) throw new Error(`the WAL kept ${walBytes()} bytes through 20 fills of the disk`);
      const checkpointer = new BetterSqlite3(file);
      try {
        checkpointer.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // A checkpoint that needs room the full disk lacks: the next turn tries again.
      } finally {
        checkpointer.close();
      }
      filler = fillDisk(dataDir);
    }

    // The relay accepts everything from now on; the outcomes cannot be recorded.
    sink.release();
    const reader = new BetterSqlite3(file, { readonly: true });
    try {
      await waitUntil(() => (sink.messages.length >= 1 ? true : undefined), { what: 'mail at the relay' });
      // Every lease runs out while the disk is full: nothing can renew it.
      await waitUntil(
        () =>
          (reader
            .prepare("select count(*) from notifications where state = 'sending' and lease_until >= ?")
            .pluck()
            .get(Date.now()) as number) === 0
            ? true
            : undefined,
        { timeoutMs: 60_000, what: () => `the leases to run out:\n${proc.output()}\n${second.output()}` },
      );
      // Past the lease, the heartbeat's stale time and a reclaim pass, with the disk still full.
      await new Promise((resolve) => setTimeout(resolve, 7_000));
      expect(
        reader.prepare("select count(*) from notifications where state = 'sending'").pluck().get(),
      ).toBeGreaterThan(0);
      // A send cannot be stored, and the process says it should get no traffic.
      const refused = await httpRequest(`${url}/api/v1/notifications`, {
        headers: { authorization: `Bearer ${apiKey}` },
        body: { template: 'welcome', to: 'late@example.org', data: { n: 'late' } },
      });
      expect(refused.status).toBe(500);
      const unready = await httpRequest(`${url}/readyz`);
      expect([unready.status, JSON.parse(unready.body)]).toEqual([
        503,
        { status: 'unavailable', error: 'database refuses writes' },
      ]);
    } finally {
      reader.close();
      unlinkSync(filler);
    }
    // Ready again once the disk has room, with no send needed to find out.
    await waitUntil(async () => ((await httpRequest(`${url}/readyz`)).status === 200 ? true : undefined), {
      what: 'the process to be ready again',
    });

    await waitUntil(
      async () => ((await services!.notifications.counts(project.id)).sent === MESSAGES ? true : undefined),
      {
        timeoutMs: 120_000,
        what: () => `all ${MESSAGES} recorded sent:\n${proc.output()}\n${second.output()}`,
      },
    );
    const perMessageId = new Map<string, number>();
    for (const message of sink.messages) {
      const id = message.parsed.messageId ?? '(none)';
      perMessageId.set(id, (perMessageId.get(id) ?? 0) + 1);
    }
    expect(perMessageId.size).toBe(MESSAGES);
    expect([...perMessageId.values()].filter((n) => n !== 1)).toEqual([]);
    const perRequestId = new Set(
      sink.messages.map((m) => String(m.parsed.headers.get('x-herald-request-id'))),
    );
    expect([...perRequestId].sort()).toEqual([...ids].sort());
    expect([...proc.problems, ...second.problems].join('\n')).toContain('recording an outcome failed');

    proc.kill('SIGTERM');
    second.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    expect(await second.exited).toBe(0);
  }, 300_000);
});
