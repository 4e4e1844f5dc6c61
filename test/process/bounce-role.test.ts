import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { HeraldProcess, runHerald } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';
import { freePort } from '../helpers/dead-relays.js';

/**
 * `herald serve --role bounces` (product.md §5, docs/webhooks.md "The listener"): with a bounce
 * domain and a port it starts, says where it listens, and speaks SMTP without AUTH or STARTTLS;
 * without the settings it needs, with an invalid domain or on a taken port it stops at once with
 * one line on stderr and exit status 1.
 */

const DOMAIN = 'bounces.example.com';
/**
 * A process that should refuse to start but serves instead is killed after this long, well within
 * the test's own timeout, so a regression fails the test and leaves no process behind.
 */
const FAIL_FAST_MS = 20_000;

let database: TestDatabase;
let blocker: Server;
let takenPort: number;
const running: HeraldProcess[] = [];

/** A line-oriented SMTP client over a raw socket: reads whole (multi-line) replies. */
class SmtpTalk {
  private buffer = '';
  private readonly waiting: (() => void)[] = [];

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (const wake of this.waiting.splice(0)) wake();
    });
  }

  static async connect(port: number): Promise<SmtpTalk> {
    const socket = createConnection({ port, host: '127.0.0.1' });
    await once(socket, 'connect');
    return new SmtpTalk(socket);
  }

  /** The next complete reply: lines `ddd-…` up to the last `ddd …`. */
  async reply(): Promise<{ code: number; lines: string[] }> {
    for (;;) {
      const match = /^(?:\d{3}-[^\r\n]*\r\n)*\d{3}(?: [^\r\n]*)?\r\n/.exec(this.buffer);
      if (match) {
        this.buffer = this.buffer.slice(match[0].length);
        const lines = match[0].trimEnd().split('\r\n');
        return { code: Number(lines.at(-1)!.slice(0, 3)), lines: lines.map((line) => line.slice(4)) };
      }
      if (this.socket.destroyed) throw new Error(`connection closed; got ${JSON.stringify(this.buffer)}`);
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        this.socket.once('close', resolve);
      });
    }
  }

  async command(line: string): Promise<{ code: number; lines: string[] }> {
    this.socket.write(`${line}\r\n`);
    return this.reply();
  }

  /** Writes raw bytes; false once the connection is gone. */
  write(data: string): boolean {
    if (this.socket.destroyed || this.socket.writableEnded) return false;
    this.socket.write(data);
    return true;
  }

  get closed(): boolean {
    return this.socket.destroyed || this.socket.readableEnded;
  }

  close(): void {
    this.socket.destroy();
  }
}

function expectOneLine(result: { code: number | null; stderr: string }, text: RegExp): void {
  expect(result.code, result.stderr).toBe(1);
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(text);
}

beforeAll(async () => {
  database = await freshDatabase();
  blocker = createServer().listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  takenPort = (blocker.address() as AddressInfo).port;
});

afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exited;
  }
});

afterAll(async () => {
  blocker?.close();
  await database?.drop();
});

describe('herald serve --role bounces', () => {
  it(
    'starts, logs its port, and answers SMTP with no AUTH and no STARTTLS',
    { timeout: 60_000 },
    async () => {
      const port = await freePort();
      const proc = new HeraldProcess(
        'bounces',
        ['serve', '--role', 'bounces'],
        testEnv(database, {
          HERALD_LOG_LEVEL: 'info',
          HERALD_HOST: '127.0.0.1',
          HERALD_BOUNCE_DOMAIN: DOMAIN,
          HERALD_BOUNCE_SMTP_PORT: String(port),
        }),
      );
      running.push(proc);
      await proc.started();
      const line = await waitUntil(
        () =>
          proc
            .output()
            .split('\n')
            .find((l) => l.includes('started') && l.includes('"bouncePort"')),
        { what: 'the start-up line' },
      );
      const entry = JSON.parse(line) as { role: string; bouncePort: number; url: string | null; msg: string };
      expect(entry).toMatchObject({ role: 'bounces', bouncePort: port, url: null });
      expect(entry.msg).toContain(`bounce reports on smtp://127.0.0.1:${port}`);

      const smtp = await SmtpTalk.connect(port);
      try {
        const greeting = await smtp.reply();
        expect(greeting.code).toBe(220);
        expect(greeting.lines[0]).toContain(DOMAIN);
        const ehlo = await smtp.command('EHLO client.example.org');
        expect(ehlo.code).toBe(250);
        const extensions = ehlo.lines.slice(1).map((l) => l.toUpperCase());
        expect(extensions.some((l) => l.startsWith('AUTH'))).toBe(false);
        expect(extensions.some((l) => l.startsWith('STARTTLS'))).toBe(false);
        expect(extensions).toContain('SIZE 1048576');
        // The commands are refused too, not only left unadvertised.
        expect((await smtp.command('STARTTLS')).code).toBeGreaterThanOrEqual(500);
        expect((await smtp.command('AUTH PLAIN AGFAAGI=')).code).toBeGreaterThanOrEqual(500);
        // And it relays nothing.
        expect((await smtp.command('MAIL FROM:<>')).code).toBe(250);
        expect((await smtp.command('RCPT TO:<jane@example.org>')).code).toBe(550);
        expect((await smtp.command('QUIT')).code).toBe(221);
      } finally {
        smtp.close();
      }
      // No HTTP server in this role.
      expect(proc.problems).toEqual([]);
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    },
  );

  it('runs inside role all when HERALD_BOUNCE_SMTP_PORT is set', { timeout: 60_000 }, async () => {
    const port = await freePort();
    const proc = new HeraldProcess(
      'all',
      ['serve'],
      testEnv(database, {
        HERALD_LOG_LEVEL: 'info',
        HERALD_HOST: '127.0.0.1',
        HERALD_PORT: '0',
        HERALD_BOUNCE_DOMAIN: DOMAIN,
        HERALD_BOUNCE_SMTP_PORT: String(port),
      }),
    );
    running.push(proc);
    const url = await proc.url();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(proc.output()).toContain(`"bouncePort":${port}`);
    const smtp = await SmtpTalk.connect(port);
    try {
      expect((await smtp.reply()).code).toBe(220);
      expect((await smtp.command('QUIT')).code).toBe(221);
    } finally {
      smtp.close();
    }
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  });

  it(
    'closes a connection that drips its DATA at the session deadline, not only when idle (issue 27, finding 10)',
    { timeout: 60_000 },
    async () => {
      const port = await freePort();
      const proc = new HeraldProcess(
        'bounces',
        ['serve', '--role', 'bounces'],
        testEnv(database, {
          HERALD_LOG_LEVEL: 'info',
          HERALD_HOST: '127.0.0.1',
          HERALD_BOUNCE_DOMAIN: DOMAIN,
          HERALD_BOUNCE_SMTP_PORT: String(port),
          HERALD_BOUNCE_SESSION_TIMEOUT_MS: '2000',
        }),
      );
      running.push(proc);
      await proc.started();
      await waitUntil(() => (proc.output().includes('"bouncePort"') ? true : undefined));
      const smtp = await SmtpTalk.connect(port);
      expect((await smtp.reply()).code).toBe(220);
      expect((await smtp.command('EHLO client.example.org')).code).toBe(250);
      expect((await smtp.command('MAIL FROM:<>')).code).toBe(250);
      expect((await smtp.command(`RCPT TO:<bounces@${DOMAIN}>`)).code).toBe(250);
      expect((await smtp.command('DATA')).code).toBe(354);
      // One byte every 200 ms: never idle for long, so only a total deadline ends it.
      let dripped = 0;
      const drip = setInterval(() => {
        if (smtp.write('x')) dripped++;
      }, 200);
      try {
        const closing = await smtp.reply();
        expect(closing.code).toBe(421);
        expect(closing.lines.at(-1)).toMatch(/^4\.4\.2 /);
        await waitUntil(() => (smtp.closed ? true : undefined), {
          what: 'the listener to close the connection',
        });
      } finally {
        clearInterval(drip);
        smtp.close();
      }
      expect(dripped).toBeGreaterThan(0);
      // The log line goes through the process's stdout, which may arrive after the close.
      await waitUntil(
        () => (proc.output().includes('bounce listener session deadline reached') ? true : undefined),
        { what: "the listener's log line of the deadline" },
      );
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
    },
  );

  it('without HERALD_BOUNCE_DOMAIN fails at once with one line', async () => {
    const result = await runHerald(
      ['serve', '--role', 'bounces'],
      testEnv(database, { HERALD_BOUNCE_SMTP_PORT: String(await freePort()) }),
      FAIL_FAST_MS,
    );
    expectOneLine(
      result,
      /^herald: HERALD_BOUNCE_SMTP_PORT needs HERALD_BOUNCE_DOMAIN: the listener accepts mail only for that domain$/,
    );
  });

  it.each([
    ['neither HERALD_BOUNCE_DOMAIN nor a port', {}],
    ['HERALD_BOUNCE_DOMAIN but no port', { HERALD_BOUNCE_DOMAIN: DOMAIN }],
  ])('with %s fails at once with one line', async (_what, env: Record<string, string>) => {
    const result = await runHerald(['serve', '--role', 'bounces'], testEnv(database, env), FAIL_FAST_MS);
    expectOneLine(
      result,
      /^herald: role bounces needs HERALD_BOUNCE_DOMAIN and HERALD_BOUNCE_SMTP_PORT, or HERALD_BOUNCE_IMAP_URL$/,
    );
  });

  it('HERALD_BOUNCE_SMTP_PORT without HERALD_BOUNCE_DOMAIN fails at once, in role all too', async () => {
    const result = await runHerald(
      ['serve'],
      testEnv(database, { HERALD_PORT: '0', HERALD_BOUNCE_SMTP_PORT: String(await freePort()) }),
      FAIL_FAST_MS,
    );
    expectOneLine(
      result,
      /^herald: HERALD_BOUNCE_SMTP_PORT needs HERALD_BOUNCE_DOMAIN: the listener accepts mail only for that domain$/,
    );
  });

  it('an invalid HERALD_BOUNCE_DOMAIN fails at once with one line', async () => {
    const result = await runHerald(
      ['serve', '--role', 'bounces'],
      testEnv(database, {
        HERALD_BOUNCE_DOMAIN: 'not a domain',
        HERALD_BOUNCE_SMTP_PORT: String(await freePort()),
      }),
      FAIL_FAST_MS,
    );
    expectOneLine(result, /^herald: HERALD_BOUNCE_DOMAIN must be a domain name .*"not a domain"/);
  });

  it('a taken bounce port fails with a message naming HERALD_BOUNCE_SMTP_PORT', async () => {
    const result = await runHerald(
      ['serve', '--role', 'bounces'],
      testEnv(database, {
        HERALD_HOST: '127.0.0.1',
        HERALD_BOUNCE_DOMAIN: DOMAIN,
        HERALD_BOUNCE_SMTP_PORT: String(takenPort),
      }),
      FAIL_FAST_MS,
    );
    expectOneLine(
      result,
      new RegExp(
        `^herald: port ${takenPort} is already in use on 127\\.0\\.0\\.1; set HERALD_BOUNCE_SMTP_PORT$`,
      ),
    );
  });
});
