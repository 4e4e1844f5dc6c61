import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { claimReport, finishReport, releaseReport } from '../storage/inbound-reports.js';
import type { Database } from '../storage/schema.js';
import type { BounceIntake, IntakeResult, ReportTarget } from './intake.js';
import type { ReportParser } from './report-parser.js';
import type { ReadReport } from './report.js';

/**
 * The one path of every report after "here are the bytes", whether they came to the SMTP listener
 * or were read from the IMAP mailbox: claim, parse (off the event loop), find its notification,
 * apply. At most once: the bytes' fingerprint is claimed before the parse and recorded as done in
 * the transaction that applies the report (storage/inbound-reports.ts), so a copy read again
 * (two workers on one mailbox, a crash between the apply and the move, an MTA resending after a
 * lost reply) changes nothing.
 *
 * The reader that applied a report also holds it for a while to move it out of the mailbox: a
 * second reader that finds it done by another leaves it to that one (two moves of one message at
 * once, on two connections, would leave two copies in the folder). Only a report whose reader
 * died between the apply and the move is still there when the hold has run out; the next reader
 * to look then moves it.
 */

/** How long a claim is held before another reader may take it over (its reader died). */
const CLAIM_MS = 5 * 60_000;
/** How long the reader that applied a report holds it to move it (a move takes milliseconds). */
export const MOVE_HOLD_MS = 60_000;

/** What one report came to, for the caller's log and metrics. */
export type ReceiveOutcome =
  | IntakeResult['outcome']
  /** Read before (the same bytes): nothing was done again. */
  | 'duplicate'
  /** Another reader is reading it right now. */
  | 'held'
  /** Not a bounce report or complaint. */
  | 'unrecognized'
  /** It names a bounce token whose MAC does not match. */
  | 'forged';

export interface Received {
  readonly outcome: ReceiveOutcome;
  /** For a duplicate: what the report came to when it was read before. */
  readonly previous?: ReceiveOutcome;
  /**
   * For a duplicate: another reader read it and still holds it, to move it out of the mailbox
   * (it is left to that one).
   */
  readonly theirs?: boolean;
  readonly kind?: ReadReport['report']['kind'];
  /** What the intake did, per target. */
  readonly results: readonly IntakeResult[];
}

/** Which notifications a read report is for: from the SMTP envelope, or from its delivery fields. */
export type TargetsOf = (read: ReadReport) => readonly ReportTarget[] | 'forged';

export class ReportReceiver {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly intake: BounceIntake,
    private readonly parser: ReportParser,
    /** This process, as the claims name it. */
    private readonly owner: string,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Reads and applies one report. `envelope` is what besides the bytes decides what it changes
   * (the listener's RCPT TO addresses), so it is part of the fingerprint. Throws ReportParserBusy
   * when too many reports wait to be parsed, and what the store throws; the claim is then given
   * back, so the report can be read again.
   */
  async receive(bytes: Buffer, targetsOf: TargetsOf, envelope = ''): Promise<Received> {
    const fingerprint = createHash('sha256').update(bytes).update(`\n${envelope}`).digest('hex');
    const now = this.now();
    const claim = await claimReport(this.db, fingerprint, this.owner, now, now + CLAIM_MS);
    if (claim.kind === 'done')
      return {
        outcome: 'duplicate',
        previous: (claim.outcome ?? undefined) as ReceiveOutcome | undefined,
        theirs: this.theirs(claim, now),
        results: [],
      };
    if (claim.kind === 'held') return { outcome: 'held', results: [] };
    try {
      return await this.apply(bytes, targetsOf, fingerprint);
    } catch (error) {
      await releaseReport(this.db, fingerprint, this.owner).catch(() => {});
      throw error;
    }
  }

  /**
   * Claims a message moved aside unread (over HERALD_BOUNCE_MAX_BYTES), by `where` it is (its
   * mailbox, UIDVALIDITY and UID: it has no bytes to go by), so that of two readers one moves it.
   * True when it is this reader's to move; false when another reader holds it.
   */
  async setAside(where: string, outcome: string): Promise<boolean> {
    const fingerprint = createHash('sha256').update(`set aside\n${where}`).digest('hex');
    const now = this.now();
    const claim = await claimReport(this.db, fingerprint, this.owner, now, now + CLAIM_MS);
    if (claim.kind === 'held') return false;
    if (claim.kind === 'done') return !this.theirs(claim, now);
    return finishReport(this.db, fingerprint, this.owner, outcome, now + MOVE_HOLD_MS);
  }

  /** Whether the store answers at all: a failure while it does not is not the report's. */
  async storeAnswers(): Promise<boolean> {
    try {
      await sql`select 1`.execute(this.db);
      return true;
    } catch {
      return false;
    }
  }

  /** Done by another reader that still holds it to move it. */
  private theirs(claim: { readonly owner: string; readonly until: number }, now: number): boolean {
    return claim.owner !== this.owner && claim.until > now;
  }

  private async apply(bytes: Buffer, targetsOf: TargetsOf, fingerprint: string): Promise<Received> {
    const read = await this.parser.read(bytes);
    const { report } = read;
    const targets = report.kind === 'unknown' ? [] : targetsOf(read);
    const until = this.now() + MOVE_HOLD_MS;
    const finish = async (outcome: ReceiveOutcome, results: IntakeResult[] = []): Promise<Received> => {
      await finishReport(this.db, fingerprint, this.owner, outcome, until);
      return { outcome, kind: report.kind, results };
    };
    if (report.kind === 'unknown') return finish('unrecognized');
    if (targets === 'forged') return finish('forged');
    const receipt = { fingerprint, owner: this.owner, until };
    const results: IntakeResult[] = [];
    for (const target of targets) results.push(await this.intake.apply(target, report, receipt));
    const changed = results.find((r) => r.outcome !== 'ignored');
    // A report that changed something was recorded as done with its change.
    if (changed !== undefined) return { outcome: changed.outcome, kind: report.kind, results };
    return finish('ignored', results);
  }
}
