import { ImapFlow } from 'imapflow';
import type { ImapSettings } from '../domain/imap-url.js';

/**
 * The IMAP side of the bounce mailbox: the only importer of imapflow, typed as the smallest thing
 * the intake needs (imap-intake.ts). Folder names use `/` between levels whatever delimiter the
 * server has (`.` on Dovecot's Maildir, `/` on Gmail); imapflow joins the levels with the server's.
 */

/** A message in the watched mailbox, as the first FETCH sees it (no bytes yet). */
export interface MailboxMessage {
  readonly uid: number;
  /** RFC822.SIZE: what the server says the message weighs. */
  readonly size: number;
}

export type ImapProblem = 'login' | 'mailbox' | 'connection' | 'protocol';

/** Why the mailbox cannot be read now; the message never holds the password. */
export class ImapError extends Error {
  override name = 'ImapError';
  constructor(
    readonly problem: ImapProblem,
    message: string,
  ) {
    super(message);
  }
}

/** Messages looked at per pass: what is left waits for the next one (bounded memory). */
const PASS_LIMIT = 500;
const CONNECT_TIMEOUT_MS = 30_000;

const levels = (folder: string): string[] => folder.split('/');

function problemOf(error: unknown, mailbox: string): ImapError {
  if (error instanceof ImapError) return error;
  const e = error as {
    authenticationFailed?: boolean;
    serverResponseCode?: string;
    responseText?: string;
    code?: string;
    message?: string;
  };
  if (e.authenticationFailed === true)
    return new ImapError('login', 'the IMAP server refused the user name or password');
  if (
    e.serverResponseCode === 'NONEXISTENT' ||
    /doesn'?t exist|does not exist|no such|unknown mailbox/i.test(e.responseText ?? '')
  )
    return new ImapError('mailbox', `the mailbox ${mailbox} does not exist`);
  if (e.code !== undefined && /^E[A-Z]+$/.test(e.code))
    return new ImapError('connection', `cannot reach the IMAP server (${e.code})`);
  const said = (e.responseText ?? e.message ?? String(error)).replace(/[\r\n]+/g, ' ').slice(0, 200);
  return new ImapError('protocol', `the IMAP server said: ${said}`);
}

/** One logged-in connection with the watched mailbox selected. */
export class ImapSession {
  private closed = false;
  /**
   * New mail was announced since the last list(). The server says so (EXISTS) with the answer to
   * whatever command comes next, not only in IDLE: mail that arrives while a pass reads and moves
   * messages is announced then, and would otherwise wait for the next poll or IDLE renewal.
   */
  private arrived = false;
  private readonly waiters = new Set<() => void>();

  private constructor(
    private readonly client: ImapFlow,
    private readonly mailbox: string,
  ) {
    client.on('exists', () => {
      this.arrived = true;
      this.wake();
    });
    client.on('close', () => {
      this.closed = true;
      this.wake();
    });
    // An error is followed by 'close'; without a listener it would be thrown.
    client.on('error', () => {});
  }

  /** Connects, logs in and creates `folders` where missing, then selects the watched mailbox. */
  static async open(settings: ImapSettings, folders: readonly string[]): Promise<ImapSession> {
    const client = new ImapFlow({
      host: settings.host,
      port: settings.port,
      secure: settings.tls === 'implicit',
      // STARTTLS is required unless `?tls=none` said otherwise: credentials never go in clear by default.
      doSTARTTLS: settings.tls === 'starttls' ? true : settings.tls === 'none' ? false : undefined,
      auth: { user: settings.user, pass: settings.password },
      logger: false,
      disableAutoIdle: true,
      connectionTimeout: CONNECT_TIMEOUT_MS,
      greetingTimeout: CONNECT_TIMEOUT_MS,
    });
    const session = new ImapSession(client, settings.mailbox);
    try {
      await client.connect();
      for (const folder of folders) await client.mailboxCreate(levels(folder));
      await client.mailboxOpen(levels(settings.mailbox));
      return session;
    } catch (error) {
      await session.close();
      throw problemOf(error, settings.mailbox);
    }
  }

  /** Whether the server announced IDLE in its CAPABILITY (else the mailbox is polled). */
  get idle(): boolean {
    return this.client.capabilities.has('IDLE');
  }

  /** The watched mailbox's UIDVALIDITY: with a UID, it names one message for good. */
  get uidValidity(): string {
    return this.client.mailbox === false ? '' : String(this.client.mailbox.uidValidity);
  }

  get open(): boolean {
    return !this.closed && this.client.usable;
  }

  /** The messages in the watched mailbox not marked \Deleted, oldest first, at most PASS_LIMIT. */
  async list(): Promise<MailboxMessage[]> {
    // What arrives from here on is either in this SEARCH or makes the next wait return at once.
    this.arrived = false;
    const uids = await this.run(() => this.client.search({ deleted: false }, { uid: true }));
    if (!uids || uids.length === 0) return [];
    const range = uids.slice(0, PASS_LIMIT).join(',');
    const messages = await this.run(() =>
      this.client.fetchAll(range, { uid: true, size: true }, { uid: true }),
    );
    return messages.map((m) => ({ uid: m.uid, size: m.size ?? 0 })).sort((a, b) => a.uid - b.uid);
  }

  /** The message's bytes, at most `maxBytes + 1` of them; null when it is gone (moved by another). */
  async download(uid: number, maxBytes: number): Promise<Buffer | null> {
    const message = await this.run(() =>
      this.client.fetchOne(String(uid), { uid: true, source: { maxLength: maxBytes + 1 } }, { uid: true }),
    );
    return message === false || message.source === undefined ? null : message.source;
  }

  /**
   * Moves the message to `folder` (MOVE, or COPY and expunge where the server has no MOVE). A
   * message already gone counts as moved; a folder that went away is created again.
   */
  async move(uid: number, folder: string): Promise<void> {
    const moved = await this.run(() => this.client.messageMove(String(uid), levels(folder), { uid: true }));
    if (moved !== false) return;
    await this.run(() => this.client.mailboxCreate(levels(folder)));
    if ((await this.run(() => this.client.messageMove(String(uid), levels(folder), { uid: true }))) === false)
      throw new ImapError('protocol', `the IMAP server did not move message ${uid} to ${folder}`);
  }

  /**
   * Waits for new mail: with IDLE until the server says a message arrived (or `ms` passes, so the
   * IDLE is renewed well within the 29 minutes of RFC 2177); without it, `ms` (the poll interval).
   * Returns at once when mail was announced since the last list(). Also ends when the connection
   * closes or `signal` aborts.
   */
  async waitForChange(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.open || signal.aborted || this.arrived) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal.addEventListener('abort', done);
      // The next command ends the IDLE; its own promise settles then.
      if (this.idle) this.client.idle().catch(() => {});
    });
  }

  private wake(): void {
    for (const done of [...this.waiters]) done();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.logout().catch(() => this.client.close());
  }

  /** A command on a connection that closed gives no answer: that is an error here. */
  private async run<T>(command: () => Promise<T>): Promise<T> {
    if (!this.open) throw new ImapError('connection', 'the IMAP connection closed');
    try {
      const result = await command();
      if (result === undefined && !this.open) throw new ImapError('connection', 'the IMAP connection closed');
      return result;
    } catch (error) {
      throw problemOf(error, this.mailbox);
    }
  }
}
