import { fork, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { StartupError } from './config.js';
import type { MetricsData } from './metrics/metrics.js';

/**
 * Role `all` runs delivery (the worker, its webhooks, the bounce intake) in a child process of its
 * own, so the API's event loop never waits for an SMTP transaction, a render or a report being
 * parsed (product.md §14). This is the parent's side: it starts the child, wakes it when the API
 * accepted mail, restarts it (with a back-off) when it dies, and stops it with the server.
 * The child's side is `startServer(…, { childOfAll: true })`; both speak the messages below.
 */

/** Child → parent: started (with the bounce listener's port, when it runs one). */
export interface ReadyMessage {
  readonly type: 'ready';
  readonly bouncePort: number | null;
}

/** Child → parent: it could not start (a port taken, a setting refused), in one line. */
export interface FailedMessage {
  readonly type: 'failed';
  readonly message: string;
}

/** Parent → child: work may be due in a queue (accepted mail; webhook deliveries queued or made due). */
export interface WakeMessage {
  readonly type: 'wake';
  readonly queue: 'mail' | 'webhooks';
}

/** Parent → child: its delivery metrics, for the parent's `/metrics`. */
export interface MetricsRequest {
  readonly type: 'metrics';
  readonly id: number;
}

/** Child → parent: the answer to a MetricsRequest. */
export interface MetricsReply {
  readonly type: 'metrics';
  readonly id: number;
  readonly metrics: MetricsData;
}

/** Parent → child: stop as SIGTERM would (finish what is in flight, give back the rest). */
export interface StopMessage {
  readonly type: 'stop';
}

/** How the child is started: the herald command as this process was started. */
export interface WorkerProcessSpawn {
  /** The CLI script (bin/herald.js, or src/cli/index.ts under tsx). */
  readonly script: string;
  /** Node's own arguments (`--import tsx` when run from source). */
  readonly execArgv: readonly string[];
  /** Arguments of the child's `serve`; `--as-worker-of-all` is added. */
  readonly args: readonly string[];
}

/** Restarts after a crash wait this long, doubling up to a minute; a minute up resets it. */
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 60_000;
const HEALTHY_AFTER_MS = 60_000;
/** How long the child may take to start (migrations done by the parent, it only connects). */
const READY_TIMEOUT_MS = 60_000;
/** How long a scrape waits for the child's metrics before it answers with the parent's alone. */
const METRICS_TIMEOUT_MS = 2_000;

export class WorkerProcess {
  private child: ChildProcess | null = null;
  private stopping = false;
  private restartDelay = RESTART_FIRST_MS;
  private restartTimer: NodeJS.Timeout | null = null;
  /** The child has said it is ready (and listens for metrics requests); false again once it exits. */
  private ready = false;
  private metricsAsked = 0;
  private readonly metricsWaiting = new Map<number, (metrics: MetricsData | null) => void>();
  /** The last child's bounce listener port. */
  bouncePort: number | null = null;

  constructor(
    private readonly spawn: WorkerProcessSpawn,
    private readonly options: { readonly stopTimeoutMs: number; readonly logger: Logger },
  ) {}

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** Starts the child and resolves once it is delivering; rejects when it fails to start. */
  async start(): Promise<void> {
    const child = fork(this.spawn.script, [...this.spawn.args, '--as-worker-of-all'], {
      execArgv: [...this.spawn.execArgv],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    const ready = await new Promise<ReadyMessage>((resolve, reject) => {
      let reason: string | null = null;
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new StartupError(`the delivery process did not start within ${READY_TIMEOUT_MS / 1000} s`));
      }, READY_TIMEOUT_MS);
      const exited = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(timer);
        reject(
          new StartupError(
            reason ?? `the delivery process exited before it started (${signal ?? `exit code ${code}`})`,
          ),
        );
      };
      child.once('exit', exited);
      child.on('message', (message: ReadyMessage | FailedMessage) => {
        if (message?.type === 'failed') reason = message.message;
        if (message?.type !== 'ready') return;
        clearTimeout(timer);
        child.off('exit', exited);
        resolve(message);
      });
    });
    this.bouncePort = ready.bouncePort;
    child.on('message', (message: MetricsReply) => {
      if (message?.type === 'metrics') this.metricsWaiting.get(message.id)?.(message.metrics);
    });
    this.ready = true;
    const startedAt = Date.now();
    child.once('exit', (code, signal) => {
      this.child = null;
      this.ready = false;
      // Scrapes waiting for this child have their answer: none.
      for (const answer of [...this.metricsWaiting.values()]) answer(null);
      if (this.stopping) return;
      if (Date.now() - startedAt >= HEALTHY_AFTER_MS) this.restartDelay = RESTART_FIRST_MS;
      this.options.logger.error(
        { code, signal, restartInMs: this.restartDelay },
        'the worker process died; restarting it',
      );
      this.scheduleRestart();
    });
  }

  /** Work may be due in a queue: the child claims at once instead of at its next look. */
  wake(queue: WakeMessage['queue']): void {
    const child = this.child;
    if (child === null || !child.connected) return;
    const message: WakeMessage = { type: 'wake', queue };
    // A wake is a hint: one lost (the child restarting) is made up by its poll.
    child.send(message, () => {});
  }

  /** The child's delivery metrics; null when it does not answer in time (restarting, or gone). */
  metrics(): Promise<MetricsData | null> {
    const child = this.child;
    if (child === null || !this.ready || !child.connected) return Promise.resolve(null);
    const id = ++this.metricsAsked;
    return new Promise((resolve) => {
      const answer = (metrics: MetricsData | null) => {
        clearTimeout(timer);
        this.metricsWaiting.delete(id);
        resolve(metrics);
      };
      const timer = setTimeout(() => answer(null), METRICS_TIMEOUT_MS);
      this.metricsWaiting.set(id, answer);
      const request: MetricsRequest = { type: 'metrics', id };
      child.send(request, (error) => {
        if (error) answer(null);
      });
    });
  }

  /**
   * Stops the child as a signal would: it finishes what is in flight (its own stop timeout), gives
   * back what it had not started, and exits; past that and a margin, it is killed.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const message: StopMessage = { type: 'stop' };
    if (child.connected) child.send(message, () => {});
    else child.kill('SIGTERM');
    const killer = setTimeout(() => {
      this.options.logger.warn('the worker process did not stop in time; killing it');
      child.kill('SIGKILL');
    }, this.options.stopTimeoutMs + 5_000);
    await exited;
    clearTimeout(killer);
  }

  private scheduleRestart(): void {
    const delay = this.restartDelay;
    this.restartDelay = Math.min(this.restartDelay * 2, RESTART_MAX_MS);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.stopping) return;
      this.start().then(
        () => this.options.logger.info({ child_pid: this.pid }, 'the worker process is running again'),
        (err: unknown) => {
          this.options.logger.error({ err }, 'restarting the worker process failed; trying again');
          if (!this.stopping) this.scheduleRestart();
        },
      );
    }, delay);
  }
}
