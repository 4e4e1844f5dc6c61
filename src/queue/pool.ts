import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Storage } from '../storage/storage.js';
import { Heartbeat } from './heartbeat.js';
import type { QueueLoop } from './loop.js';

/** A lease owner name: unique per process start, readable in the database. */
export function newOwnerName(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

export interface PoolOptions {
  readonly leaseMs: number;
  readonly pollMs: number;
}

/**
 * The queue loops of one worker process under one lease owner and one heartbeat: the heartbeat
 * vouches for every lease the process holds, so when it stops moving, all of the process's work,
 * in every queue, goes back at once.
 */
export class WorkerPool {
  private readonly heartbeat: Heartbeat;
  private readonly loops: QueueLoop[] = [];
  private starting: Promise<void> | null = null;
  private stopping = false;

  constructor(
    private readonly storage: Storage,
    readonly owner: string,
    private readonly options: PoolOptions,
    private readonly logger: Logger,
    /** Whether leases are still held after the loops stopped (work that outlived the stop). */
    private readonly holdsLeases: () => boolean,
    now: () => number = Date.now,
  ) {
    this.heartbeat = new Heartbeat(
      storage,
      owner,
      logger,
      Math.max(250, Math.floor(options.leaseMs / 4)),
      () => this.wake(),
      now,
    );
  }

  add(loop: QueueLoop): void {
    this.loops.push(loop);
  }

  /** The first heartbeat is written before the first claim: a worker is never unknown to its peers. */
  start(): void {
    this.stopping = false;
    this.starting ??= this.beatThenRun();
  }

  /** Work may be due in every queue (leases came back). */
  wake(): void {
    for (const loop of this.loops) loop.wake();
  }

  /**
   * Stops claiming in every queue, lets work in flight finish (bounded by the stop timeout) and
   * gives back what was not started, then stops the heartbeat.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.starting;
    this.starting = null;
    await Promise.all(this.loops.map((loop) => loop.stop()));
    await this.heartbeat.stop(this.holdsLeases());
  }

  private async beatThenRun(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.heartbeat.start();
        break;
      } catch (err) {
        this.logger.error({ err }, 'writing the first worker heartbeat failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, this.options.pollMs));
      }
    }
    if (this.stopping) return;
    for (const loop of this.loops) loop.start();
  }
}
