import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './wait.js';

/**
 * Herald as separate processes, run as users run it: `node bin/herald.js …`, from the build that
 * test/build-herald.ts makes from the source before the suites that start processes run, so they
 * never run a stale build. Every spawned process belongs to a ProcessGroup whose
 * killAll() a test calls in afterAll, whatever happened before.
 */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Node's arguments that run the `herald` command. */
export const HERALD_CLI: readonly string[] = [path.join(REPO_ROOT, 'bin', 'herald.js')];
/** Lines of output kept per process, to explain a failure. */
const KEEP_LINES = 200;

/** The test's environment without any HERALD_* or PORT of its own, plus `env`. */
export function heraldProcessEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('HERALD_') && name !== 'PORT' && name !== 'NODE_ENV') clean[name] = value;
  }
  return { ...clean, ...env };
}

export interface CommandResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs one `herald …` command to completion, with `input` on its stdin when given. */
export function runHerald(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
  input?: string,
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...HERALD_CLI, ...args], {
      cwd: REPO_ROOT,
      env: heraldProcessEnv(env),
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (input !== undefined) child.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`herald ${args.join(' ')} did not finish within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs `herald ARGS --json`, expecting exit 0 and one JSON object on stdout. */
export async function heraldJson<T>(args: readonly string[], env: Record<string, string>): Promise<T> {
  const result = await runHerald([...args, '--json'], env);
  if (result.code !== 0) {
    throw new Error(`herald ${args.join(' ')} exited ${result.code}: ${result.stderr.trim()}`);
  }
  return JSON.parse(result.stdout) as T;
}

export class HeraldProcess {
  readonly child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  readonly exited: Promise<number | null>;
  private readonly lines: string[] = [];
  /** Every warning and error the process logged (pino levels 40 and up), kept in full. */
  readonly problems: string[] = [];
  private exitCode: number | null | undefined = undefined;
  private urlFound: ((url: string) => void) | null = null;
  private startedUrl: string | null = null;

  constructor(
    readonly name: string,
    args: readonly string[],
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, [...HERALD_CLI, ...args], {
      cwd: REPO_ROOT,
      env: heraldProcessEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: role all's delivery runs in a child process, and a kill -9 of
      // Herald (kill()) takes both, as a service manager's would.
      detached: true,
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      });
    });
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let partial = '';
      stream?.setEncoding('utf8').on('data', (chunk: string) => {
        const parts = (partial + chunk).split('\n');
        partial = parts.pop() ?? '';
        for (const line of parts) this.line(line);
      });
    }
  }

  private line(line: string): void {
    this.lines.push(line);
    if (this.lines.length > KEEP_LINES) this.lines.shift();
    if (/"level":(4|5|6)0/.test(line)) this.problems.push(line);
    // The start-up log line carries the bound address (HERALD_PORT=0 picks a free port).
    if (this.startedUrl === null && line.includes('"url":"http')) {
      try {
        const entry = JSON.parse(line) as { url?: unknown };
        if (typeof entry.url === 'string') {
          this.startedUrl = entry.url;
          this.urlFound?.(entry.url);
        }
      } catch {
        // not a JSON log line
      }
    }
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** The last lines the process printed (stdout and stderr). */
  output(): string {
    return this.lines.join('\n');
  }

  /** The HTTP address the process logged at start-up (api and all roles). */
  url(timeoutMs = 60_000): Promise<string> {
    if (this.startedUrl !== null) return Promise.resolve(this.startedUrl);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} logged no URL within ${timeoutMs} ms:\n${this.output()}`)),
        timeoutMs,
      );
      this.urlFound = (url) => {
        clearTimeout(timer);
        resolve(url);
      };
      void this.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code}) before listening:\n${this.output()}`));
      });
    });
  }

  /** Waits until the process logs `… started` (every role logs it once it is serving). */
  async started(timeoutMs = 60_000): Promise<void> {
    await waitUntil(
      () => {
        if (this.lines.some((line) => line.includes('started'))) return true;
        if (!this.running) throw new Error(`${this.name} exited (${this.exitCode}):\n${this.output()}`);
        return undefined;
      },
      { timeoutMs, intervalMs: 50, what: () => `${this.name} to start:\n${this.output()}` },
    );
  }

  /**
   * SIGTERM goes to Herald, which stops its delivery process itself; SIGKILL takes the whole
   * process group at once, as `systemctl kill -s KILL` or a crash of the machine would.
   */
  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (!this.running) return;
    if (signal === 'SIGKILL') killGroup(this.child);
    else this.child.kill(signal);
  }

  /** Signals the whole process group, as systemd's default KillMode=control-group does. */
  killGroup(signal: NodeJS.Signals): void {
    if (this.running && this.child.pid !== undefined) process.kill(-this.child.pid, signal);
  }
}

/** SIGKILLs a process started `detached` and every process of its group (role all's delivery). */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** Polls GET /healthz until it answers 200. */
export async function waitForHealthy(url: string, proc?: HeraldProcess, timeoutMs = 60_000): Promise<void> {
  await waitUntil(
    async () => {
      try {
        const response = await fetch(`${url}/healthz`);
        if (response.status === 200) return true;
      } catch {
        // not listening yet
      }
      if (proc !== undefined && !proc.running)
        throw new Error(`${proc.name} exited before it was healthy:\n${proc.output()}`);
      return undefined;
    },
    { timeoutMs, intervalMs: 100, what: `${url}/healthz to answer 200` },
  );
}

/** Every Herald process a test file started; killAll() in afterAll leaves none behind. */
export class ProcessGroup {
  private readonly all: HeraldProcess[] = [];

  /** `herald serve --role api|all`, on a free port; resolves once /healthz answers. */
  async http(
    name: string,
    role: 'api' | 'all',
    env: Record<string, string>,
  ): Promise<{ proc: HeraldProcess; url: string }> {
    const proc = this.spawn(name, role, env);
    const url = await proc.url();
    await waitForHealthy(url, proc);
    return { proc, url };
  }

  /** `herald serve --role worker`; resolves once the worker logged that it started. */
  async worker(name: string, env: Record<string, string>): Promise<HeraldProcess> {
    const proc = this.spawn(name, 'worker', env);
    await proc.started();
    return proc;
  }

  private spawn(name: string, role: 'api' | 'worker' | 'all', env: Record<string, string>): HeraldProcess {
    // HERALD_PORT=0 binds a free port, read back from the start-up log line (no port races).
    const proc = new HeraldProcess(name, ['serve', '--role', role], {
      HERALD_PORT: '0',
      HERALD_HOST: '127.0.0.1',
      HERALD_LOG_LEVEL: 'info',
      ...env,
    });
    this.all.push(proc);
    return proc;
  }

  /** SIGKILLs every process still running and waits for each to exit. */
  async killAll(): Promise<void> {
    await Promise.all(
      this.all.map(async (proc) => {
        proc.kill('SIGKILL');
        await proc.exited;
      }),
    );
  }
}

export interface HttpReply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One HTTP request with node:http (a keep-alive agent lets thousands of sends reuse connections). */
export function httpRequest(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: unknown;
    /** A body sent as it is (with its own content-type header), instead of `body` as JSON. */
    raw?: string | Buffer;
    agent?: http.Agent;
    timeoutMs?: number;
  } = {},
): Promise<HttpReply> {
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: options.method ?? (payload === undefined ? 'GET' : 'POST'),
        agent: options.agent,
        headers: {
          ...(payload !== undefined && options.raw === undefined && { 'content-type': 'application/json' }),
          ...(options.raw !== undefined && { 'content-length': String(Buffer.byteLength(options.raw)) }),
          ...options.headers,
        },
        timeout: options.timeoutMs ?? 30_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer in time`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Sends `count` notifications with at most `concurrency` requests in flight, spread round-robin
 * over the `urls` (api processes). Returns each reply in send order.
 */
export async function sendNotifications(options: {
  urls: readonly string[];
  apiKey: string;
  count: number;
  concurrency: number;
  agent?: http.Agent;
  body?: (i: number) => unknown;
}): Promise<HttpReply[]> {
  const replies: HttpReply[] = new Array<HttpReply>(options.count);
  const body =
    options.body ??
    ((i: number) => ({ template: 'welcome', to: `user${i}@example.org`, data: { user_name: `User ${i}` } }));
  let next = 0;
  const lane = async () => {
    while (next < options.count) {
      const i = next++;
      replies[i] = await httpRequest(`${options.urls[i % options.urls.length]}/api/v1/notifications`, {
        headers: { authorization: `Bearer ${options.apiKey}` },
        body: body(i),
        agent: options.agent,
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, options.count) }, lane));
  return replies;
}

/** The request_id of a 202 reply. */
export function requestIdOf(reply: HttpReply): string {
  return (JSON.parse(reply.body) as { request_id: string }).request_id;
}

/**
 * A project and its `welcome` template, made with the CLI as a user makes them; returns the
 * project's API key.
 */
export async function cliProjectWithTemplate(
  env: Record<string, string>,
  project: string,
  template: { subject?: string; text?: string } = {},
): Promise<string> {
  const { api_key: apiKey } = await heraldJson<{ api_key: string }>(
    ['project', 'create', '--name', project, '--from-email', `noreply@${project}.example`],
    env,
  );
  await heraldJson(
    [
      'template',
      'create',
      '--project',
      project,
      '--name',
      'welcome',
      '--subject',
      template.subject ?? 'Hi',
      '--text',
      template.text ?? 'Hello',
    ],
    env,
  );
  return apiKey;
}

/** An HTTP endpoint for webhook calls, answering each with a 204: `calls` holds their bodies. */
export class WebhookReceiver {
  readonly calls: string[] = [];
  private readonly server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      this.calls.push(body);
      response.writeHead(204).end();
    });
  });

  /** Listens on a loopback port; resolves with the URL to register. */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}/hooks`;
  }

  close(): void {
    this.server.closeAllConnections();
    this.server.close();
  }
}

/** Schedules a `welcome` send an hour ahead through `url` and cancels it; returns its request_id. */
export async function scheduleAndCancel(url: string, apiKey: string): Promise<string> {
  const scheduled = await httpRequest(`${url}/api/v1/notifications`, {
    headers: { authorization: `Bearer ${apiKey}` },
    body: {
      template: 'welcome',
      to: 'later@example.org',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    },
  });
  if (scheduled.status !== 202)
    throw new Error(`the scheduled send got ${scheduled.status}: ${scheduled.body}`);
  const requestId = requestIdOf(scheduled);
  const canceled = await httpRequest(`${url}/api/v1/notifications/${requestId}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${apiKey}` },
  });
  if (canceled.status !== 200) throw new Error(`the cancel got ${canceled.status}: ${canceled.body}`);
  return requestId;
}

/** Waits for the receiver's first call (`what` names it in a timeout); returns its body, parsed. */
export async function firstCall(receiver: WebhookReceiver, what: string): Promise<unknown> {
  const [call] = await waitUntil(() => (receiver.calls.length > 0 ? receiver.calls : undefined), { what });
  return JSON.parse(call!) as unknown;
}
