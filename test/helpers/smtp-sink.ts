import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';

/**
 * A real SMTP server in the test process (the `smtp-server` package), with the faults a relay can
 * produce: a recipient rejected with a reply code, temporary failures of the next N messages, a
 * delayed greeting, and transactions held at MAIL FROM until the test lets them go.
 */
export interface ReceivedMessage {
  readonly envelopeFrom: string;
  readonly envelopeTo: string[];
  readonly raw: Buffer;
  readonly parsed: ParsedMail;
}

export interface SinkError extends Error {
  responseCode?: number;
}

function smtpError(code: number, message: string): SinkError {
  const error: SinkError = new Error(message);
  error.responseCode = code;
  return error;
}

export class SmtpSink {
  readonly messages: ReceivedMessage[] = [];
  /** Recipient address → [code, text] it is rejected with at RCPT TO. */
  readonly rejectRecipients = new Map<string, [number, string]>();
  /** The next N messages get this reply after DATA instead of 250. */
  failNext: { count: number; code: number; message: string } | null = null;
  greetingDelayMs = 0;
  /** Transactions waiting at MAIL FROM while holding; null when not holding. */
  private held: (() => void)[] | null = null;
  /** Recipient → transactions to it waiting at RCPT TO until `releaseRecipient`. */
  private readonly heldRecipients = new Map<string, (() => void)[]>();
  /** After a release with `refuseLater`, new transactions get 451 at MAIL FROM. */
  private refusing = false;
  private readonly server: SMTPServer;
  private waiters: { count: number; resolve: () => void }[] = [];
  port = 0;

  constructor() {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      // A send may carry 10 MiB of files, about 14 MB once base64-encoded.
      size: 20 * 1024 * 1024,
      onConnect: (_session, callback) => {
        if (this.greetingDelayMs > 0) setTimeout(() => callback(), this.greetingDelayMs);
        else callback();
      },
      onMailFrom: (_address, _session, callback) => {
        if (this.refusing) callback(smtpError(451, '4.3.2 Try again later'));
        else if (this.held !== null) this.held.push(() => callback());
        else callback();
      },
      onRcptTo: (address, _session, callback) => {
        const rejection = this.rejectRecipients.get(address.address);
        const held = this.heldRecipients.get(address.address);
        if (rejection) callback(smtpError(rejection[0], rejection[1]));
        else if (held !== undefined) held.push(() => callback());
        else callback();
      },
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          if (this.failNext && this.failNext.count > 0) {
            this.failNext.count--;
            callback(smtpError(this.failNext.code, this.failNext.message));
            return;
          }
          const raw = Buffer.concat(chunks);
          this.accept(session, raw).then(
            () => callback(null),
            (error: unknown) => callback(error as Error),
          );
        });
      },
    });
  }

  private async accept(session: SMTPServerSession, raw: Buffer): Promise<void> {
    const parsed = await simpleParser(raw);
    this.messages.push({
      envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
      envelopeTo: session.envelope.rcptTo.map((r) => r.address),
      raw,
      parsed,
    });
    this.waiters = this.waiters.filter((w) => {
      if (this.messages.length >= w.count) w.resolve();
      return this.messages.length < w.count;
    });
  }

  /** From now on, each transaction waits at MAIL FROM until `release`. */
  hold(): void {
    this.held ??= [];
  }

  /** From now on, transactions to `address` wait at RCPT TO (a slow relay) until released. */
  holdRecipient(address: string): void {
    if (!this.heldRecipients.has(address)) this.heldRecipients.set(address, []);
  }

  /** Transactions to `address` waiting at RCPT TO now. */
  heldFor(address: string): number {
    return this.heldRecipients.get(address)?.length ?? 0;
  }

  /** Lets the transactions to `address` go on, and holds no more of them. */
  releaseRecipient(address: string): void {
    const waiting = this.heldRecipients.get(address) ?? [];
    this.heldRecipients.delete(address);
    for (const proceed of waiting) proceed();
  }

  /** Transactions waiting at MAIL FROM now. */
  get waiting(): number {
    return this.held?.length ?? 0;
  }

  /**
   * Lets the waiting transactions go on and stops holding. With `refuseLater`, every transaction
   * that starts afterwards is answered 451, so exactly the released ones can be delivered.
   */
  release(options: { refuseLater?: boolean } = {}): number {
    const waiting = this.held ?? [];
    this.held = null;
    this.refusing = options.refuseLater ?? false;
    for (const proceed of waiting) proceed();
    return waiting.length;
  }

  /** Accepts mail normally again after a release with `refuseLater`. */
  acceptAgain(): void {
    this.refusing = false;
  }

  async start(port = 0): Promise<this> {
    // A client killed mid-transaction (the crash tests SIGKILL Herald) resets its connection;
    // that is an expected event here, not a reason to crash the test process.
    this.server.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}?security=none`;
  }

  /** Resolves when at least `count` messages have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 15_000): Promise<void> {
    if (this.messages.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`expected ${count} messages, got ${this.messages.length}`)),
        timeoutMs,
      );
      this.waiters.push({
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
