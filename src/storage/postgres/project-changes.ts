import pg from 'pg';
import { WORK_CHANNEL } from './work-notices.js';

/** The channel on which migration 009's trigger announces every committed change to projects. */
export const PROJECT_CHANGES_CHANNEL = 'herald_projects';

/** How often the listening connection is checked, by default. */
const CHECK_MS = 1_000;

/**
 * How long after a commit every listening process has either received its notice or stopped
 * keeping keys: twice the check interval (a connection that stalls silently just after a check is
 * given up when the next check goes unanswered), and a quarter more for timers that fire late.
 */
export function changesSettleMs(checkMs = CHECK_MS): number {
  return Math.ceil(2.25 * checkMs);
}

/**
 * Throws unless migration 009's trigger is there and enabled: a trigger disabled by hand (or
 * dropped) announces nothing, and keys must then not be kept.
 */
async function announcing(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ tgenabled: string }>(
    `SELECT tgenabled FROM pg_trigger WHERE tgrelid = 'projects'::regclass AND tgname = 'projects_changed'`,
  );
  if (rows[0]?.tgenabled !== 'O' && rows[0]?.tgenabled !== 'A')
    throw new Error('the trigger projects_changed is missing or disabled');
}

/** What the listener tells its owner: it listens now, or it lost its connection (and why). */
export type ProjectChangesState =
  { readonly listening: true } | { readonly listening: false; readonly error: Error };

export interface ProjectChangesOptions {
  readonly url: string;
  /** Told when listening starts and when the connection is lost; must not throw. */
  readonly onState?: (state: ProjectChangesState) => void;
  /** How long to wait before connecting again after a failure. */
  readonly retryMs?: number;
  /**
   * How often the idle connection is asked to answer (1 s by default). A connection cut without a
   * word (a network partition, a stalled server) delivers no notices and no error either; the
   * check bounds how long that goes unnoticed to twice this.
   */
  readonly checkMs?: number;
  /**
   * Given in a worker process: the connection also listens for other processes' announcements of
   * queued work (work-notices.ts), each passed on with its payload.
   */
  readonly onWork?: (payload: string) => void;
  /**
   * Whether it follows changes to projects (true by default). A worker process that serves no API
   * listens for work alone: it neither needs migration 009's trigger nor depends on it.
   */
  readonly projects?: boolean;
}

/**
 * Follows changes to projects made by any connection, through `LISTEN herald_projects` on a
 * connection of its own, so that a process can keep API keys in memory and still refuse a rotated
 * key (product.md §8) once the rotation has committed anywhere.
 *
 * `version()` moves with every notice. While there is no listening connection (before the first
 * `LISTEN` completes, after the connection is lost, until it is back), a change could pass
 * unannounced, so `version()` moves at every call: nothing read then is ever served from memory.
 * When listening resumes it moves once more, dropping whatever was kept before the gap.
 *
 * In a worker process the same connection listens for notices of queued work (work-notices.ts).
 */
export class ProjectChanges {
  private counter = 0;
  private client: pg.Client | null = null;
  private listening = false;
  /** Whether the owner was last told of a failure: one report per outage, not one per retry. */
  private reportedFailure = false;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private checkTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: ProjectChangesOptions) {
    void this.connect();
  }

  private get follows(): boolean {
    return this.options.projects ?? true;
  }

  /** The connection answers, and where it follows projects, their trigger still announces changes. */
  private async answering(client: pg.Client): Promise<void> {
    if (this.follows) await announcing(client);
    else await client.query('SELECT 1');
  }

  version(): number {
    return this.listening ? this.counter : ++this.counter;
  }

  /** Whether notices are being received now (tests, diagnostics). */
  get isListening(): boolean {
    return this.listening;
  }

  private async connect(): Promise<void> {
    this.retryTimer = null;
    const client = new pg.Client({
      connectionString: this.options.url,
      application_name: this.follows ? 'herald project changes' : 'herald work notices',
      keepAlive: true,
      connectionTimeoutMillis: 5_000,
    });
    this.client = client;
    const { onWork } = this.options;
    client.on('notification', ({ channel, payload }) => {
      if (channel === WORK_CHANNEL) onWork?.(payload ?? '');
      else this.counter++;
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('the listening connection ended')));
    try {
      await client.connect();
      if (this.follows) await client.query(`LISTEN ${PROJECT_CHANGES_CHANNEL}`);
      if (onWork !== undefined) await client.query(`LISTEN ${WORK_CHANNEL}`);
      await this.answering(client);
    } catch (error) {
      this.lost(client, error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (this.client !== client) return;
    this.counter++;
    this.listening = true;
    this.checkTimer = setInterval(() => this.check(client), this.options.checkMs ?? CHECK_MS);
    this.checkTimer.unref();
    this.reportedFailure = false;
    this.options.onState?.({ listening: true });
  }

  /**
   * An answer within the interval, and the trigger still announcing changes, or the connection is
   * treated as lost.
   */
  private check(client: pg.Client): void {
    const checkMs = this.options.checkMs ?? CHECK_MS;
    const timeout = setTimeout(() => this.lost(client, new Error(`no answer within ${checkMs} ms`)), checkMs);
    timeout.unref();
    this.answering(client).then(
      () => clearTimeout(timeout),
      (error: unknown) => {
        clearTimeout(timeout);
        this.lost(client, error instanceof Error ? error : new Error(String(error)));
      },
    );
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.client !== client) return;
    this.client = null;
    this.listening = false;
    this.counter++;
    if (this.checkTimer !== null) clearInterval(this.checkTimer);
    this.checkTimer = null;
    client.end().catch(() => {});
    if (this.closed) return;
    if (!this.reportedFailure) {
      this.reportedFailure = true;
      this.options.onState?.({ listening: false, error });
    }
    this.retryTimer = setTimeout(() => void this.connect(), this.options.retryMs ?? 1_000);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    if (this.checkTimer !== null) clearInterval(this.checkTimer);
    const client = this.client;
    this.client = null;
    this.listening = false;
    await client?.end().catch(() => {});
  }
}
