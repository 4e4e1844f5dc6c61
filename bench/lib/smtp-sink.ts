/**
 * Postfix's smtp-sink as the receiving end of every delivery figure. It runs with -c, so it
 * prints "sess=… quit=… mesg=N" each time a message ends; the bench timestamps each change of N
 * as it arrives on the pipe, which gives message-arrival times without touching the disk.
 * With a dump file (-D) it also keeps every message, used only to learn Herald's message size.
 */
import { chmod, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { HOST, freePort, tcpAnswers } from './net.js';
import { spawnTracked, type Tracked } from './processes.js';

export const SMTP_SINK = '/usr/sbin/smtp-sink';
const DUMP_SEPARATOR = '@@HERALD-BENCH-MESSAGE@@';

export interface SinkWait {
  reached: boolean;
  count: number;
  /** performance.now() when the first message ended, and when the count reached its target. */
  firstAt: number | undefined;
  lastAt: number | undefined;
}

export interface Sink {
  port: number;
  url: string;
  process: Tracked;
  count(): number;
  firstAt(): number | undefined;
  /** Resolves when `target` messages have arrived, after `timeoutMs`, or when the sink dies. */
  waitFor(target: number, timeoutMs: number): Promise<SinkWait>;
  stop(): Promise<void>;
}

export async function startSink(options: { dumpFile?: string; delayS?: number } = {}): Promise<Sink> {
  const port = await freePort();
  const args = ['-c'];
  // A relay far away: each session waits this long before its DATA command is answered.
  if (options.delayS !== undefined) args.push('-w', String(options.delayS));
  // smtp-sink refuses to run as root without dropping privileges.
  if (process.getuid?.() === 0) args.push('-u', 'nobody');
  if (options.dumpFile !== undefined) {
    await mkdir(dirname(options.dumpFile), { recursive: true });
    await chmod(dirname(options.dumpFile), 0o777);
    args.push('-S', `\\n${DUMP_SEPARATOR}\\n`, '-D', options.dumpFile);
  }
  args.push(`${HOST}:${port}`, '1000');
  const sink = spawnTracked('smtp-sink', SMTP_SINK, args, { stdio: ['ignore', 'pipe', 'pipe'] });

  let count = 0;
  let firstAt: number | undefined;
  let stderr = '';
  const waiters = new Set<() => void>();
  const arrivals = new Map<number, number>();
  let pending = '';
  sink.child.stdout?.on('data', (chunk: Buffer) => {
    const now = performance.now();
    pending += chunk.toString('latin1');
    // Only complete records: a chunk may end in the middle of "mesg=1234".
    const matches = [...pending.matchAll(/mesg=(\d+)[\r\n]/g)];
    const last = matches.at(-1);
    if (last === undefined) return;
    pending = pending.slice((last.index ?? 0) + last[0].length);
    const value = Number(last[1]);
    if (value <= count) return;
    count = value;
    firstAt ??= now;
    arrivals.set(count, now);
    for (const wake of waiters) wake();
  });
  sink.child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));

  const deadline = performance.now() + 5_000;
  while (!(await tcpAnswers(HOST, port, 500))) {
    if (sink.hasExited() || performance.now() > deadline) {
      await sink.stop(1_000);
      throw new Error(`smtp-sink did not start on port ${port}: ${stderr.trim() || 'no output'}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    port,
    url: `smtp://${HOST}:${port}`,
    process: sink,
    count: () => count,
    firstAt: () => firstAt,
    waitFor(target, timeoutMs) {
      return new Promise((resolve) => {
        const finish = (reached: boolean) => {
          waiters.delete(check);
          clearTimeout(timer);
          let lastAt: number | undefined;
          for (const [n, at] of arrivals)
            if (n >= target && (lastAt === undefined || at < lastAt)) lastAt = at;
          resolve({ reached, count, firstAt, lastAt: reached ? lastAt : undefined });
        };
        const check = () => {
          if (count >= target) finish(true);
        };
        const timer = setTimeout(() => finish(false), timeoutMs);
        waiters.add(check);
        void sink.exited.then(() => finish(count >= target));
        check();
      });
    },
    async stop() {
      await sink.stop(2_000);
    },
  };
}

/**
 * Sizes in bytes (LF line ends, as the dump stores them) of the messages in a dump file:
 * the client's header and body, without the X-* and Received lines that smtp-sink adds.
 */
export async function dumpedMessageSizes(dumpFile: string): Promise<number[]> {
  const text = await readFile(dumpFile, 'latin1');
  const sizes: number[] = [];
  for (const chunk of text.split(`\n${DUMP_SEPARATOR}\n`).slice(1)) {
    const lines = chunk.split('\n');
    const received = lines.findIndex((l) => l.startsWith('Received: '));
    if (received < 0) continue;
    let start = received + 1;
    while (start < lines.length && /^[ \t]/.test(lines[start] ?? '')) start += 1;
    // smtp-sink ends each dumped message with an empty line.
    const message = lines.slice(start).join('\n').replace(/\n+$/, '\n');
    sizes.push(Buffer.byteLength(message, 'latin1'));
  }
  return sizes;
}
