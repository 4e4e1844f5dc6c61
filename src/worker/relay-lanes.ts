import type { Logger } from 'pino';
import type { AttemptResult } from '../domain/attempt.js';
import { mayUseLane, type LanePolicy } from '../domain/lanes.js';
import {
  nextWindow,
  openWindow,
  relaySignal,
  reopenWindow,
  windowSize,
  type RelayWindow,
  type WindowPolicy,
} from '../domain/relay-window.js';

/** What a transaction to a relay is judged against when it ends (`RelayLanes.take`). */
export interface LaneTicket {
  readonly round: number;
  readonly served: number;
}

/**
 * A connection the relay refused before its greeting came, with a transient answer (a 421 greeting,
 * a reset): nothing was sent. A connection lost later, even one nodemailer labels `CONN` (closed
 * after the message's body), is a failed attempt like any other, and so is a connection on which
 * the relay said nothing until the time ran out: that is a relay not answering, not one out of room.
 */
function refusedConnection(result: AttemptResult): boolean {
  return (
    !result.ok &&
    result.transport === 'smtp' &&
    result.failure.kind === 'transient' &&
    result.failure.command === 'CONN' &&
    result.failure.reached === false &&
    result.failure.timedOut !== true
  );
}

/** A transaction the relay took past its greeting, whatever came of it. */
function pastGreeting(result: AttemptResult): boolean {
  return result.ok || result.failure.reached === true;
}

/**
 * How a worker's mail lanes are shared between relays (host and port): each relay holds at most
 * its window of them (domain/relay-window.ts, learned from its answers), never more than its
 * share and never the reserved quarter (domain/lanes.ts). Mail for a relay with no room waits
 * here, parked without a lane, in the order it came.
 */
export class RelayLanes<Parked> {
  private readonly busy = new Map<string, number>();
  private readonly parked = new Map<string, Parked[]>();
  /** Per relay, how many of its parked entries each project has. */
  private readonly parkedProjects = new Map<string, Map<number, number>>();
  private readonly windows = new Map<string, RelayWindow>();
  /** Per relay, how many of our transactions it has taken past its greeting (`learn`). */
  private readonly served = new Map<string, number>();

  constructor(
    private readonly lanes: LanePolicy,
    private readonly policy: WindowPolicy,
    private readonly logger: Logger,
    /** The project whose mail a parked entry is. */
    private readonly projectOf: (entry: Parked) => number,
  ) {}

  /** Whether one more transaction to the relay may start, with `active` lanes in use (its own included). */
  mayStart(relay: string, active: number): boolean {
    return mayUseLane(this.lanes, this.inFlight(relay), active, this.limit(relay));
  }

  inFlight(relay: string): number {
    return this.busy.get(relay) ?? 0;
  }

  /**
   * A transaction to the relay starts. Its ticket: the round it belongs to (its answer is judged
   * against it) and how many transactions the relay had served by then.
   */
  take(relay: string): LaneTicket {
    this.busy.set(relay, this.inFlight(relay) + 1);
    return { round: this.window(relay).round, served: this.served.get(relay) ?? 0 };
  }

  /** A lane of the relay held for a job that is not yet a transaction (given back with `free`). */
  hold(relay: string): void {
    this.busy.set(relay, this.inFlight(relay) + 1);
  }

  /** A transaction to the relay ended, or a held lane is given back. */
  free(relay: string): void {
    const busy = this.inFlight(relay) - 1;
    if (busy <= 0) this.busy.delete(relay);
    else this.busy.set(relay, busy);
  }

  park(relay: string, entry: Parked, first = false): void {
    let waiting = this.parked.get(relay);
    if (waiting === undefined) this.parked.set(relay, (waiting = []));
    if (first) waiting.unshift(entry);
    else waiting.push(entry);
    let projects = this.parkedProjects.get(relay);
    if (projects === undefined) this.parkedProjects.set(relay, (projects = new Map()));
    const project = this.projectOf(entry);
    projects.set(project, (projects.get(project) ?? 0) + 1);
  }

  unpark(relay: string): Parked | undefined {
    const waiting = this.parked.get(relay);
    const next = waiting?.shift();
    if (next !== undefined) {
      const projects = this.parkedProjects.get(relay)!;
      const project = this.projectOf(next);
      const left = projects.get(project)! - 1;
      if (left === 0) projects.delete(project);
      else projects.set(project, left);
    }
    if (waiting?.length === 0) this.forget(relay);
    return next;
  }

  /** Everything parked behind one relay, taken out (the relay went down). */
  unparkRelay(relay: string): Parked[] {
    const waiting = this.parked.get(relay) ?? [];
    this.forget(relay);
    return waiting;
  }

  /** Everything parked that `taken` picks, taken out of every relay's line (a cancel). */
  unparkWhere(taken: (entry: Parked) => boolean): Parked[] {
    const out: Parked[] = [];
    for (const [relay, waiting] of [...this.parked]) {
      if (!waiting.some(taken)) continue;
      this.forget(relay);
      for (const entry of waiting) {
        if (taken(entry)) out.push(entry);
        else this.park(relay, entry);
      }
    }
    return out;
  }

  private forget(relay: string): void {
    this.parked.delete(relay);
    this.parkedProjects.delete(relay);
  }

  /** A relay that was down is back: its window starts small again (relay-window.ts `reopenWindow`). */
  reopen(relay: string): void {
    this.windows.set(relay, reopenWindow(this.window(relay), this.policy));
  }

  /**
   * A relay that refused a connection while it was serving others of ours has no room for more
   * just now: its window has shrunk, and the message waits for a lane of that relay instead of
   * counting a failed attempt (nothing was sent). Serving others means: some are in flight as the
   * refusal is read, or one was served since this one started (it may have ended just before the
   * refusal was read). Refused while the relay served none of ours, the attempt is recorded.
   */
  refusedForRoom(relay: string, result: AttemptResult, ticket: LaneTicket): boolean {
    return (
      refusedConnection(result) && (this.inFlight(relay) > 1 || (this.served.get(relay) ?? 0) > ticket.served)
    );
  }

  /** Everything parked, taken out (a stop gives it back to the queue). */
  unparkAll(): Parked[] {
    const all = [...this.parked.values()].flat();
    this.parked.clear();
    this.parkedProjects.clear();
    return all;
  }

  /** The relays with mail parked behind them. */
  parkedRelays(): string[] {
    return [...this.parked.keys()];
  }

  /** The ids of the projects with mail parked behind any relay. */
  parkedProjectIds(): Set<number> {
    const projects = new Set<number>();
    for (const counts of this.parkedProjects.values())
      for (const project of counts.keys()) projects.add(project);
    return projects;
  }

  /**
   * The projects with mail parked behind a relay that has a whole window's worth parked: mail of
   * theirs already waits for its room. Asked on every turn of the worker's loop, so it counts
   * projects per relay rather than looking at every parked entry.
   */
  saturatedProjects(): Set<number> {
    const projects = new Set<number>();
    for (const [relay, waiting] of this.parked)
      if (waiting.length >= this.limit(relay))
        for (const project of this.parkedProjects.get(relay)!.keys()) projects.add(project);
    return projects;
  }

  /** Every relay's window now (metrics, tests). */
  windowSizes(): Map<string, number> {
    return new Map([...this.windows].map(([relay, window]) => [relay, windowSize(window)]));
  }

  /**
   * Feeds one finished attempt to its relay's window: `finished.inFlight` transactions to the relay
   * were in flight when it ended, its own included.
   */
  learn(
    relay: string,
    finished: { round: number; inFlight: number; durationMs: number },
    result: AttemptResult,
  ): void {
    if (result.transport !== 'smtp') return;
    if (pastGreeting(result)) this.served.set(relay, (this.served.get(relay) ?? 0) + 1);
    const { durationMs } = finished;
    const signal = relaySignal(
      result.ok
        ? { ok: true, smtpCode: result.smtpCode, reply: result.response, transient: false, durationMs }
        : {
            ok: false,
            smtpCode: result.failure.smtpCode,
            reply: result.failure.message,
            transient: result.failure.kind === 'transient',
            durationMs,
          },
      this.policy,
    );
    const before = this.window(relay);
    const after = nextWindow(
      before,
      { signal, round: finished.round, inFlight: finished.inFlight },
      this.policy,
    );
    if (after === before) return;
    this.windows.set(relay, after);
    if (after.round !== before.round)
      this.logger.info(
        { relay, window: windowSize(after), reply: result.ok ? null : result.failure.message },
        'relay congested; fewer transactions in flight to it',
      );
  }

  /** Transactions the relay may have in flight now: its window, within its share of the lanes. */
  private limit(relay: string): number {
    return Math.min(this.lanes.perRelay, windowSize(this.window(relay)));
  }

  private window(relay: string): RelayWindow {
    let window = this.windows.get(relay);
    if (window === undefined) this.windows.set(relay, (window = openWindow(this.policy)));
    return window;
  }
}
