import type { Logger } from 'pino';
import { Trouble } from '../logger.js';
import { isLockTimeout, refusesWrites } from '../storage/lock-timeout.js';
import type { ImapIntakeConfig } from '../config.js';
import { describeImap } from '../domain/imap-url.js';
import { ImapError, ImapSession, type MailboxMessage } from './imap.js';
import type { ReportTarget } from './intake.js';
import type { Received, ReceiveOutcome, ReportReceiver, TargetsOf } from './receive.js';
import { ReportParserBusy, type ReportParser } from './report-parser.js';
import { classifyBounceAddress } from './token.js';

/**
 * Reads bounce reports from a mailbox (HERALD_BOUNCE_IMAP_URL, product.md §9): for senders without
 * an MX or an inbound port. It watches the mailbox (IMAP IDLE where the server's CAPABILITY has it,
 * else a poll every HERALD_BOUNCE_IMAP_POLL_MS), reads each message through the same path as the
 * listener (receive.ts: at most once, parsed off the event loop), then moves it: read reports to
 * HERALD_BOUNCE_IMAP_DONE, mail that is not a report (or too large, or with a forged token) to
 * Herald/Unrecognized. Nothing is ever deleted.
 *
 * Trouble never stops the process: a refused login, an unreachable server, a mailbox that went
 * away are each logged once (again only when the trouble changes) and retried after 1 s, doubling
 * up to 5 minutes; a connection that worked starts the back-off over. Trouble with the store
 * (it does not answer, or has no room) ends a look, and the next comes after the same back-off,
 * on the same connection. A message the store refuses while it works otherwise does not hold up
 * the ones after it: it is logged once, read again at the next look (after the back-off unless
 * new mail comes first), and after three looks moved to Herald/Unrecognized. The watched mailbox is
 * waited for, never created (mail is delivered to it by the server: a new empty one would hide a
 * misconfiguration); the two folders Herald moves mail to are created when missing.
 */

/** What became of one message, as the metric counts it. */
export type ImapOutcome = Exclude<ReceiveOutcome, 'held'> | 'too_large' | 'unreadable';

/** A message the store refuses, while it answers otherwise, is read this many times, then set aside. */
const MAX_READS = 3;

export interface ImapIntakeOptions {
  readonly config: ImapIntakeConfig;
  /** The bounce token MAC key. */
  readonly key: Buffer;
  /** HERALD_BOUNCE_MAX_BYTES: larger messages are moved aside without being downloaded. */
  readonly maxBytes: number;
  readonly receiver: ReportReceiver;
  readonly parser: ReportParser;
  readonly logger: Logger;
  /** First retry delay after a failure; doubles up to `maxBackoffMs`. */
  readonly firstBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly onMessage?: (outcome: ImapOutcome) => void;
  readonly onConnected?: (connected: boolean) => void;
}

const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;
/** IDLE is renewed this often at most (RFC 2177: within 29 minutes), with a look at the mailbox. */
const IDLE_RENEW_MS = 4 * 60_000;

/**
 * Which notification a message in the mailbox is about: the token in the address it was delivered
 * to (`<local>+<token>@<domain>`, as the receiving server recorded it in Delivered-To and its
 * kin), else none (matched by the returned Message-ID and recipient, as plain `bounces@` is); a
 * token whose MAC fails makes it forged.
 */
export function mailboxTargets(key: Buffer, address: { local: string; domain: string }): TargetsOf {
  return (read) => {
    let forged = false;
    for (const delivered of read.deliveredTo) {
      const target = classifyBounceAddress(key, delivered, address.domain, address.local);
      if (target.kind === 'token') return [target] as ReportTarget[];
      if (target.kind === 'forged') forged = true;
    }
    return forged ? 'forged' : [{ kind: 'plain' }];
  };
}

const UNRECOGNIZED: ReadonlySet<ReceiveOutcome | undefined> = new Set(['unrecognized', 'forged']);

/** The store, not the message, failed: the look ends and is made again after a back-off. */
class StoreTrouble extends Error {
  constructor(override readonly cause: unknown) {
    super('the store failed', { cause });
  }
}

export class ImapIntake {
  private readonly abort = new AbortController();
  private session: ImapSession | null = null;
  private running: Promise<void> | null = null;
  private readonly where: string;
  private readonly targetsOf: TargetsOf;
  /** Trouble with the store while reading the mailbox, logged when it begins, changes and ends. */
  private readonly storeTrouble: Trouble;
  /** Messages that could not be read (by UIDVALIDITY and UID): the problem last logged, and how often. */
  private readonly unreadable = new Map<string, { readonly problem: string; readonly reads: number }>();

  constructor(private readonly options: ImapIntakeOptions) {
    this.where = describeImap(options.config);
    this.storeTrouble = new Trouble(
      options.logger,
      `bounce mailbox ${this.where}: storing reports`,
      'error',
      {
        mailbox: this.where,
      },
    );
    this.targetsOf = mailboxTargets(options.key, options.config.address);
  }

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.session?.close();
    await this.running;
  }

  private async run(): Promise<void> {
    const first = this.options.firstBackoffMs ?? FIRST_BACKOFF_MS;
    const max = this.options.maxBackoffMs ?? MAX_BACKOFF_MS;
    const { logger, config } = this.options;
    let delay = first;
    let trouble: string | null = null;
    while (!this.abort.signal.aborted) {
      try {
        const session = (this.session = await ImapSession.open(config, [
          config.doneFolder,
          config.unrecognizedFolder,
        ]));
        if (this.abort.signal.aborted) break;
        this.options.onConnected?.(true);
        const how = session.idle ? 'IMAP IDLE' : `polling every ${config.pollMs / 1000} s (no IDLE)`;
        logger.info(
          { mailbox: this.where, idle: session.idle },
          `${trouble === null ? 'watching' : 'watching again'} ${this.where} for bounce reports (${how})`,
        );
        trouble = null;
        delay = first;
        let retry = first;
        while (session.open && !this.abort.signal.aborted) {
          let unread = true;
          try {
            unread = await this.pass(session);
            this.storeTrouble.succeeded();
          } catch (error) {
            if (!(error instanceof StoreTrouble)) throw error;
            this.storeTrouble.failed(error.cause, 'reading the mailbox again after a back-off');
          }
          const wait = session.idle ? Math.min(config.pollMs, IDLE_RENEW_MS) : config.pollMs;
          await session.waitForChange(unread ? Math.min(wait, retry) : wait, this.abort.signal);
          retry = unread ? Math.min(retry * 2, max) : first;
        }
      } catch (error) {
        if (this.abort.signal.aborted) break;
        const problem = error instanceof ImapError ? error.message : `unexpected error: ${String(error)}`;
        const after = delay < 1000 ? `${delay} ms` : `${Math.round(delay / 1000)} s`;
        const line = `bounce mailbox ${this.where}: ${problem}; trying again in ${after}, then less often (at least every ${max < 60_000 ? `${max / 1000} s` : `${max / 60_000} minutes`})`;
        if (problem !== trouble) logger.error({ mailbox: this.where, err: error }, line);
        else logger.debug({ mailbox: this.where }, line);
        trouble = problem;
      } finally {
        this.options.onConnected?.(false);
        await this.session?.close();
        this.session = null;
      }
      if (this.abort.signal.aborted) break;
      await sleep(delay, this.abort.signal);
      if (trouble !== null) delay = Math.min(delay * 2, max);
    }
  }

  /** One look at the mailbox: every message there, oldest first. True when one could not be read. */
  private async pass(session: ImapSession): Promise<boolean> {
    let unread = false;
    let whole = true;
    const seen = new Set<string>();
    for (const message of await session.list()) {
      if (this.abort.signal.aborted || !session.open) {
        whole = false;
        break;
      }
      const where = `${session.uidValidity}\n${message.uid}`;
      seen.add(where);
      if (!(await this.handle(session, message, where))) unread = true;
    }
    // Forget the failures of messages no longer there (moved by another reader, or by hand).
    if (whole)
      for (const where of this.unreadable.keys()) if (!seen.has(where)) this.unreadable.delete(where);
    return unread;
  }

  /**
   * False when the message could not be read, and stays for the next look. A failure of the store
   * itself (it does not answer, holds its lock past the wait, or has no room) ends the look, and
   * the mailbox is read again after a back-off, on the same connection.
   */
  private async handle(session: ImapSession, message: MailboxMessage, where: string): Promise<boolean> {
    try {
      await this.read(session, message);
    } catch (error) {
      if (error instanceof ImapError || !session.open) throw error;
      if (isLockTimeout(error) || refusesWrites(error) || !(await this.options.receiver.storeAnswers()))
        throw new StoreTrouble(error);
      return this.couldNotRead(session, message.uid, where, error);
    }
    this.unreadable.delete(where);
    return true;
  }

  /**
   * A message the store refuses while it answers otherwise (its report holds what the store
   * cannot take): logged once, read again at the next look, and after MAX_READS looks moved to
   * the unrecognised folder, so that no message holds the mailbox up. False: it stays for now.
   */
  private async couldNotRead(
    session: ImapSession,
    uid: number,
    where: string,
    error: unknown,
  ): Promise<boolean> {
    const { config, logger, receiver } = this.options;
    const problem = error instanceof Error ? error.message : String(error);
    const before = this.unreadable.get(where);
    const reads = (before?.reads ?? 0) + 1;
    this.unreadable.set(where, { problem, reads });
    if (reads < MAX_READS) {
      const line = `bounce mailbox message ${uid} could not be read (${problem}); left in ${config.mailbox} and read again at the next look`;
      if (before?.problem === problem) logger.debug({ mailbox: this.where, uid }, line);
      else logger.error({ mailbox: this.where, uid, err: error }, line);
      return false;
    }
    const folder = config.unrecognizedFolder;
    if (!(await receiver.setAside(`${config.mailbox}\n${where}`, 'unreadable'))) return false;
    await session.move(uid, folder);
    this.unreadable.delete(where);
    this.options.onMessage?.('unreadable');
    logger.warn(
      { mailbox: this.where, uid, problem },
      `bounce mailbox message ${uid} could not be read in ${reads} looks (${problem}); moved to ${folder}`,
    );
    return true;
  }

  private async read(session: ImapSession, message: MailboxMessage): Promise<void> {
    const { config, maxBytes, logger } = this.options;
    if (message.size > maxBytes) return this.tooLarge(session, message.uid, message.size);
    const bytes = await session.download(message.uid, maxBytes);
    if (bytes === null) return; // moved by another reader meanwhile
    if (bytes.length > maxBytes) return this.tooLarge(session, message.uid, bytes.length);
    await this.options.parser.room();
    let received: Received;
    try {
      received = await this.options.receiver.receive(bytes, this.targetsOf);
    } catch (error) {
      // The listener filled the queue meanwhile: the message stays, the next pass reads it.
      if (error instanceof ReportParserBusy) return;
      throw error;
    }
    // Another reader is reading it, or read it and is moving it: left to that one.
    if (received.outcome === 'held' || received.theirs === true) {
      logger.debug(
        { mailbox: this.where, uid: message.uid, outcome: received.outcome },
        `bounce mailbox message ${message.uid} is another reader's to move; left in ${config.mailbox}`,
      );
      return;
    }
    const outcome = received.outcome === 'duplicate' ? received.previous : received.outcome;
    const folder = UNRECOGNIZED.has(outcome) ? config.unrecognizedFolder : config.doneFolder;
    await session.move(message.uid, folder);
    this.options.onMessage?.(received.outcome);
    logger.info(
      {
        mailbox: this.where,
        uid: message.uid,
        outcome: received.outcome,
        report: received.kind,
        folder,
        results: received.results,
      },
      `bounce mailbox message ${received.outcome === 'duplicate' ? 'read before' : received.outcome}; moved to ${folder}`,
    );
  }

  /**
   * Larger than HERALD_BOUNCE_MAX_BYTES: moved aside unread (its size came from the FETCH), by the
   * one reader that claims it.
   */
  private async tooLarge(session: ImapSession, uid: number, size: number): Promise<void> {
    const { config, receiver } = this.options;
    const folder = config.unrecognizedFolder;
    if (!(await receiver.setAside(`${config.mailbox}\n${session.uidValidity}\n${uid}`, 'too_large'))) return;
    await session.move(uid, folder);
    this.options.onMessage?.('too_large');
    this.options.logger.warn(
      { mailbox: this.where, uid, size, maxBytes: this.options.maxBytes },
      `bounce mailbox message of ${size} bytes is over HERALD_BOUNCE_MAX_BYTES; moved unread to ${folder}`,
    );
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
