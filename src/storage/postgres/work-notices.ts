import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type { QueueTable } from '../queue.js';
import type { Database } from '../schema.js';

/** The channel on which processes announce work they queued to the workers of other processes. */
export const WORK_CHANNEL = 'herald_work';

/**
 * The least time between the starts of two notices of one process: at most 200 a second under any
 * load. The first after a quiet spell goes at once; one within this time of the last waits the rest.
 */
const SPACING_MS = 5;

/** A token for a process's notices of queued work, unlike any other process's. */
export function newNoticeToken(): string {
  return randomBytes(8).toString('hex');
}

/** Whether notices go out: told at the first that fails, and at the first sent after a failure. */
export type WorkNoticesState =
  { readonly sending: true } | { readonly sending: false; readonly error: Error };

/**
 * PostgreSQL cannot tell a worker cheaply that another process committed work (SQLite's
 * data_version can), so a worker idle in another process would find it only at its poll. A process
 * that queued work says so once the work has committed: `NOTIFY herald_work`, the queue's table and
 * this process's token as the payload. Workers listening on that channel (project-changes.ts) wake
 * the queue's loop; their own process's notices they ignore, since it woke them already.
 *
 * A notice is a hint: one lost (the listening connection down, the NOTIFY failed) is made up by the
 * poll, and a failed NOTIFY never fails the work it announces; `onState` hears when notices stop
 * going out and when they go out again, so the slower pickup is not silent. Announcements that
 * come while a notice waits or is being sent go out together in the next.
 */
export class WorkNotices {
  readonly #token: string;
  readonly #pending = new Set<QueueTable>();
  #sending: Promise<void> | null = null;
  /** When the last notice was sent: the next waits until SPACING_MS after it. */
  #sentAt = -Infinity;
  #failing = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly onState: (state: WorkNoticesState) => void = () => {},
    /**
     * What this process's notices carry, and which notices it takes for its own: a new one unless
     * given. Role all's delivery child carries its parent's, since the parent wakes it over IPC
     * already: a notice of the parent's would only wake it a second time, for a claim that finds
     * nothing.
     */
    token: string = newNoticeToken(),
  ) {
    this.#token = token;
  }

  /** Work was committed in this queue: tells the other processes' workers. */
  announce(table: QueueTable): void {
    this.#pending.add(table);
    this.#sending ??= this.#send();
  }

  /** The queue a notice announces work in, or null for this process's own notices and any other payload. */
  heard(payload: string): QueueTable | null {
    const [table, token] = payload.split(' ');
    if (token === this.#token) return null;
    return table === 'notifications' || table === 'webhook_deliveries' ? table : null;
  }

  /** Waits for the announcement being sent, so a process that stops has told the others. */
  async close(): Promise<void> {
    await this.#sending;
  }

  #spacingLeft(): number {
    return this.#sentAt + SPACING_MS - performance.now();
  }

  #report(state: WorkNoticesState): void {
    this.#failing = !state.sending;
    // Called from the send loop, which nothing awaits: a listener that throws must not end it.
    try {
      this.onState(state);
    } catch (error) {
      console.error('a listener of work notices failed', error);
    }
  }

  async #send(): Promise<void> {
    try {
      while (this.#pending.size > 0) {
        // Timers fire to the millisecond, sometimes a fraction early: wait until the time has come.
        for (let wait = this.#spacingLeft(); wait > 0; wait = this.#spacingLeft())
          await delay(Math.ceil(wait));
        this.#sentAt = performance.now();
        const notices = [...this.#pending].map(
          (table) => sql`pg_notify(${WORK_CHANNEL}, ${`${table} ${this.#token}`})`,
        );
        this.#pending.clear();
        let failure: Error | null = null;
        try {
          await sql`SELECT ${sql.join(notices)}`.execute(this.db);
        } catch (error) {
          // A hint only: the workers' poll finds what it announced.
          failure = error instanceof Error ? error : new Error(String(error));
        }
        if (failure !== null && !this.#failing) this.#report({ sending: false, error: failure });
        else if (failure === null && this.#failing) this.#report({ sending: true });
      }
    } finally {
      this.#sending = null;
    }
  }
}
