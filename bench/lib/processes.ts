/**
 * Child processes of the bench: every long-lived child is tracked so that a failure, Ctrl-C or
 * SIGTERM stops exactly the processes this run started (by pid), and cleanup hooks (temporary
 * directories, PostgreSQL databases) run once.
 */
import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Tracked {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves when the process has exited, however that happened. */
  readonly exited: Promise<Exit>;
  hasExited(): boolean;
  /** How it ended, and whether the signal (if any) came from the bench or from elsewhere. */
  describeExit(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<Exit>;
}

const live = new Set<Tracked>();
/** Short commands in flight (runCommand): killed outright on cleanup. */
const commands = new Set<ChildProcess>();
const cleanups = new Set<() => Promise<void> | void>();

/** Set once cleanup has begun: from then on nothing new may start, or it would be orphaned. */
let stopping = false;

export function spawnTracked(name: string, command: string, args: string[], options: SpawnOptions): Tracked {
  if (stopping) throw new Error(`not starting ${name}: the bench is stopping`);
  const child = spawn(command, args, options);
  if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`);
  const pid = child.pid;
  let done = false;
  let stopRequested = false;
  let last: Exit | undefined;
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      last = { code, signal };
      live.delete(tracked);
      resolve({ code, signal });
    });
  });
  const tracked: Tracked = {
    name,
    child,
    pid,
    exited,
    hasExited: () => done,
    describeExit() {
      if (last === undefined) return `${name} (pid ${pid}) is running`;
      const how =
        last.signal === null ? `exited with code ${last.code ?? '?'}` : `was ended by ${last.signal}`;
      // A process that handles SIGTERM exits with a code, so the code alone cannot tell who stopped it.
      return stopRequested
        ? `${name} (pid ${pid}) ${how}`
        : `${name} (pid ${pid}) ${how} although the bench did not stop it`;
    },
    async stop(graceMs = 10_000) {
      if (done) return exited;
      stopRequested = true;
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (!done) child.kill('SIGKILL');
      }, graceMs);
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
  live.add(tracked);
  return tracked;
}

/** Registers a hook run by cleanupAll(); returns a function that unregisters it. */
export function onCleanup(hook: () => Promise<void> | void): () => void {
  cleanups.add(hook);
  return () => cleanups.delete(hook);
}

let cleaning: Promise<void> | undefined;

/** True once cleanup has begun (a signal, or the end of the run). */
export function isStopping(): boolean {
  return stopping;
}

/**
 * Kills the short commands in flight, stops every tracked child (2 s grace each, in parallel),
 * then runs the cleanup hooks, newest first. Every call returns the same single cleanup.
 */
export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    stopping = true;
    for (const child of commands) child.kill('SIGKILL');
    await Promise.all([...live].map((t) => t.stop(2_000)));
    for (const hook of [...cleanups].reverse()) {
      cleanups.delete(hook);
      try {
        await hook();
      } catch (error) {
        console.error(`cleanup: ${(error as Error).message}`);
      }
    }
  })();
  return cleaning;
}

export function installSignalHandlers(): void {
  let signalled = false;
  const handler = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    process.stderr.write(`\n${signal}: stopping the bench's child processes…\n`);
    void cleanupAll().finally(() => process.exit(130));
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

export interface CommandResult {
  stdout: string;
  stderr: string;
}

/** Runs a short command to completion; rejects with its stderr on a non-zero exit or timeout. */
export function runCommand(
  command: string,
  args: string[],
  options: {
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    timeoutMs?: number;
    input?: string;
    cleanup?: boolean;
  } = {},
): Promise<CommandResult> {
  // Once stopping, only cleanup hooks may run commands (dropping a database, for instance).
  if (stopping && options.cleanup !== true)
    return Promise.reject(new Error(`not running ${command}: the bench is stopping`));
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        env: options.env ?? process.env,
        cwd: options.cwd,
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        killSignal: 'SIGKILL',
      },
      (error, stdout, stderr) => {
        commands.delete(child);
        if (error) {
          const detail = (stderr || stdout || error.message).trim().split('\n').slice(-15).join('\n');
          reject(new Error(`${[command, ...args].join(' ')} failed: ${detail}`));
          return;
        }
        resolve({ stdout, stderr });
      },
    );
    commands.add(child);
    // Close stdin at once so that a command never waits for input the bench will not send.
    child.stdin?.end(options.input ?? '');
  });
}
