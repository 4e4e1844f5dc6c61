import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateWebhookSecret, webhookHeaders } from '../../src/security/webhook-signature.js';
import { REPO_ROOT } from '../helpers/processes.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * The two receivers of docs/webhooks.md, taken from the document as written (found by their
 * `<!-- snippet: … -->` markers) and run as real programs, then sent deliveries signed the way
 * Herald signs them: the published verifiers must accept Herald's signature and refuse a changed
 * body, another secret and a stale timestamp.
 */

const DOC = 'docs/webhooks.md';
/** Bound on a receiver's start-up; it only has to open a port. */
const START_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 5_000;
const STOP_TIMEOUT_MS = 5_000;

function snippet(name: string, language: string): string {
  const doc = readFileSync(path.join(REPO_ROOT, DOC), 'utf8');
  const marker = `<!-- snippet: ${name} -->`;
  const at = doc.indexOf(marker);
  if (at === -1) throw new Error(`${DOC} has no "${marker}" marker`);
  const fence = '```';
  const match = new RegExp(`^\\r?\\n${fence}${language}\\r?\\n([\\s\\S]*?)\\r?\\n${fence}`).exec(
    doc.slice(at + marker.length),
  );
  if (match === null)
    throw new Error(`"${marker}" in ${DOC} is not immediately followed by a ${fence}${language} block`);
  return match[1]!;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.setTimeout(1_000);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** One receiver program, started as a child process on a free port. */
class Receiver {
  private output = '';
  private exitCode: number | null | undefined = undefined;
  readonly exited: Promise<void>;

  private constructor(
    readonly label: string,
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    for (const stream of [child.stdout, child.stderr])
      stream
        ?.setEncoding('utf8')
        .on('data', (chunk: string) => (this.output = (this.output + chunk).slice(-8_000)));
    this.exited = new Promise((resolve) => {
      child.once('error', (error) => {
        this.output += `\n${String(error)}`;
        this.exitCode = null;
        resolve();
      });
      child.once('exit', (code) => {
        this.exitCode = code;
        resolve();
      });
    });
  }

  static async start(label: string, command: string, script: string, secret: string): Promise<Receiver> {
    const port = await freePort();
    const child = spawn(command, [script], {
      cwd: path.dirname(script),
      env: { PATH: process.env.PATH, PORT: String(port), HERALD_WEBHOOK_SECRET: secret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const receiver = new Receiver(label, child, port);
    try {
      await waitUntil(
        async () => {
          if (receiver.exitCode !== undefined)
            throw new Error(
              `the ${label} receiver exited (${receiver.exitCode}) before listening:\n${receiver.output}`,
            );
          return (await canConnect(port)) ? true : undefined;
        },
        {
          timeoutMs: START_TIMEOUT_MS,
          intervalMs: 50,
          what: () => `the ${label} receiver to listen:\n${receiver.output}`,
        },
      );
    } catch (error) {
      await receiver.stop();
      throw error;
    }
    return receiver;
  }

  /** POSTs one delivery and returns the status code of the answer. */
  async post(body: string | Uint8Array, headers: Record<string, string>): Promise<number> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.port}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'Herald-Webhooks/1', ...headers },
        body,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      await response.arrayBuffer();
      return response.status;
    } catch (error) {
      throw new Error(`the ${this.label} receiver did not answer: ${String(error)}\n${this.output}`, {
        cause: error,
      });
    }
  }

  async stop(): Promise<void> {
    if (this.exitCode !== undefined) return;
    this.child.kill('SIGTERM');
    const stopped = await Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_TIMEOUT_MS)),
    ]);
    if (!stopped) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

/** A `notification.sent` event as Herald sends it. */
function sentEvent(): string {
  const at = new Date().toISOString();
  return JSON.stringify({
    type: 'notification.sent',
    timestamp: at,
    data: {
      id: 1042,
      request_id: '6ca96467-f238-4ca2-8a74-4d74c53fa207',
      status: 'sent',
      template: 'user_created',
      to: 'jane@example.org',
      type: 'email',
      attempts: 1,
      created_at: at,
      updated_at: at,
      sent_at: at,
      transport: 'smtp',
      project: 'shop',
    },
  });
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const messageId = () => `msg_${randomBytes(12).toString('hex')}`;

const receivers = [
  { name: 'node-verify', language: 'js', file: 'receiver.mjs', command: process.execPath, label: 'Node' },
  { name: 'python-verify', language: 'python', file: 'receiver.py', command: 'python3', label: 'Python' },
] as const;

describe.each(receivers)(`${DOC} $name snippet`, ({ name, language, file, command, label }) => {
  const secret = generateWebhookSecret();
  let dir: string | undefined;
  let receiver: Receiver | undefined;

  beforeAll(async () => {
    const source = snippet(name, language);
    dir = mkdtempSync(path.join(tmpdir(), 'herald-webhook-docs-'));
    // ESM ignores NODE_PATH: a node_modules beside the script lets `import 'standardwebhooks'`
    // resolve to the repository's installed copy.
    symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    const script = path.join(dir, file);
    writeFileSync(script, source);
    receiver = await Receiver.start(label, command, script, secret);
  });

  afterAll(async () => {
    await receiver?.stop();
    // Removes the symlink itself, never what it points to.
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('accepts a delivery signed as Herald signs it (204)', async () => {
    const body = sentEvent();
    const id = messageId();
    expect(await receiver!.post(body, webhookHeaders(secret, id, nowSeconds(), body))).toBe(204);
    // At-least-once: the same delivery again is acknowledged too (and handled once).
    expect(await receiver!.post(body, webhookHeaders(secret, id, nowSeconds(), body))).toBe(204);
  });

  it('refuses a body with one byte changed (400)', async () => {
    const body = sentEvent();
    const headers = webhookHeaders(secret, messageId(), nowSeconds(), body);
    const tampered = Buffer.from(body, 'utf8');
    const at = tampered.indexOf('"status":"sent"') + '"status":"'.length;
    expect(at).toBeGreaterThan('"status":"'.length);
    tampered[at] = tampered[at]! ^ 0x20; // "sent" → "Sent"
    expect(await receiver!.post(new Uint8Array(tampered), headers)).toBe(400);
  });

  it('refuses a delivery signed with another secret (400)', async () => {
    const body = sentEvent();
    const headers = webhookHeaders(generateWebhookSecret(), messageId(), nowSeconds(), body);
    expect(await receiver!.post(body, headers)).toBe(400);
  });

  it('refuses a correctly signed delivery whose timestamp is 10 minutes old (400)', async () => {
    const body = sentEvent();
    const headers = webhookHeaders(secret, messageId(), nowSeconds() - 600, body);
    expect(await receiver!.post(body, headers)).toBe(400);
  });
});
