import { Readable } from 'node:stream';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Deadline } from './deadline.js';
import type { LoginGate } from './login-gate.js';
import { classifySmtpError, refusedCredentials, SmtpDeliveryError } from './smtp-failures.js';

/**
 * Connections to one relay with one login, kept open between messages: the only user of
 * nodemailer's SMTP client. Each transaction has a connection of its own for its whole length, so
 * the relay's answer to it, a refused connection included, is the answer to that message and to
 * nothing else; the worker's window per relay (domain/relay-window.ts) learns from exactly that.
 * How many connections are open at once is the caller's to bound: the worker's lanes never hold
 * more transactions to a relay than its window.
 */

export interface RelayConnectionOptions {
  /** The address to connect to; a name, or the address a name was pinned to. */
  readonly host: string;
  readonly port: number;
  /** The name for TLS when `host` is a pinned address. */
  readonly servername?: string;
  /** TLS from the first byte (`smtps://`). */
  readonly secure: boolean;
  readonly requireTLS: boolean;
  readonly ignoreTLS: boolean;
  readonly auth: { readonly user: string; readonly pass: string } | null;
  /** Whose turn it is to log in, and whether the relay refused this login lately (with `auth`). */
  readonly logins?: LoginGate;
  /** Bounds each wait: connect, greeting, and every reply; an idle connection closes after it. */
  readonly timeoutMs: number;
}

export interface SmtpEnvelope {
  readonly from: string;
  readonly to: string;
}

interface SmtpClientError extends Error {
  code?: string;
  responseCode?: number;
}

/** Failures of the connection itself rather than replies about the message. */
function connectionLost(error: SmtpClientError): boolean {
  return (
    error.responseCode === 421 ||
    error.code === 'ECONNECTION' ||
    error.code === 'ESOCKET' ||
    error.code === 'ETIMEDOUT'
  );
}

const aborted = () => Object.assign(new Error('SMTP transaction aborted'), { code: 'ETIMEDOUT' });

/**
 * nodemailer's connection, counting the replies it reads. nodemailer keeps each reply, and a line
 * the relay left without its line end before closing, in `lastServerResponse`; counting what is
 * written there tells a greeting that came before the last reply from a last reply that was the
 * greeting (`greetingCame`). The accessor sits on the prototype, so connections keep the fast
 * property layout nodemailer's own code is optimised for.
 */
class CountingConnection extends SMTPConnection {
  // Declared, not initialised: nodemailer's constructor writes the reply before fields would be.
  declare repliesRead: number | undefined;
  declare lastReply: unknown;
}
Object.defineProperty(CountingConnection.prototype, 'lastServerResponse', {
  configurable: true,
  get(this: CountingConnection): unknown {
    return this.lastReply;
  },
  set(this: CountingConnection, reply: unknown) {
    this.lastReply = reply;
    // nodemailer starts it at false; only replies are strings.
    if (typeof reply === 'string') this.repliesRead = (this.repliesRead ?? 0) + 1;
  },
});

/**
 * Whether the relay's greeting came on `connection`, judged when setting it up failed with
 * `error`. nodemailer labels `CONN` a failure of the greeting (a refusal, a timeout, a greeting
 * other than 220) and also a connection lost later (during EHLO, STARTTLS or AUTH, even with a
 * last reply such as a `421` left without its line end), so the label cannot tell; the replies
 * read can. None (or bytes that are not one): no greeting. One: the greeting, if it was a 220 (as
 * nodemailer judges one); a greeting other than 220 is the reply the error carries. More than
 * one: the first was the greeting.
 */
function greetingCame(connection: CountingConnection, error: SmtpClientError): boolean {
  const command = (error as { command?: unknown }).command;
  if (command !== undefined && command !== 'CONN') return true;
  const replies = connection.repliesRead ?? 0;
  if (replies > 1) return true;
  const last: unknown = connection.lastServerResponse;
  return replies === 1 && typeof last === 'string' && last.startsWith('220');
}

/** Whether the relay's greeting had come when `error` happened (true for failures after connecting). */
export function greetedBefore(error: unknown): boolean {
  const greeted = (error as { greeted?: unknown } | null)?.greeted;
  return typeof greeted === 'boolean' ? greeted : true;
}

/** Whether the relay had taken the connection and sent nothing when `error` happened (`silentOn`). */
export function silentBefore(error: unknown): boolean {
  return (error as { silent?: unknown } | null)?.silent === true;
}

/**
 * Whether the relay took `connection` and has sent not a byte on it. nodemailer's stage turns
 * `connected` once the socket is open (and TLS, if implicit, set up); a relay that sent anything,
 * even a greeting it never finished, has spoken. Asked only of a connection not greeted: after
 * STARTTLS the socket is a new one, its bytes read counted from the handshake.
 */
function silentOn(connection: SMTPConnection): boolean {
  const socket = (connection as unknown as { _socket?: { bytesRead?: number } })._socket;
  return connection.stage === 'connected' && (socket?.bytesRead ?? 0) === 0;
}

/**
 * Whether the relay's address never took `connection`: its socket is still making the TCP
 * connection. Before the socket exists (nodemailer's `_socket` is false while it looks the name
 * up) nothing was tried yet: a look-up that hangs is not a relay that does not answer.
 */
function unansweredOn(connection: SMTPConnection): boolean {
  const socket = (connection as unknown as { _socket?: unknown })._socket;
  return (
    typeof socket === 'object' && socket !== null && (socket as { connecting?: unknown }).connecting === true
  );
}

/**
 * Whether the whole message, its final dot included, has left for the relay on `connection`:
 * `message` read to its end, nodemailer's data stream (which escapes the dots and adds the last
 * one) ended, and the socket holding none of it back. A relay that stopped reading holds it back.
 */
function sentWholeOn(connection: SMTPConnection, message: Readable): boolean {
  const inner = connection as unknown as { _currentDataStream?: unknown; _socket?: unknown };
  const socket = inner._socket;
  return (
    message.readableEnded &&
    inner._currentDataStream === false &&
    typeof socket === 'object' &&
    socket !== null &&
    (socket as { writableLength?: unknown }).writableLength === 0
  );
}

/** Whether the whole message had been sent when `error` happened (see Deadline.sentWhole). */
export function sentWholeBefore(error: unknown): boolean {
  return (error as { sentWhole?: unknown } | null)?.sentWhole === true;
}

/** Whether nothing had taken the connection when `error` happened (see Deadline.unanswered). */
export function unansweredBefore(error: unknown): boolean {
  return (error as { unanswered?: unknown } | null)?.unanswered === true;
}

export class RelayPool {
  private readonly idle: SMTPConnection[] = [];
  private readonly open = new Set<SMTPConnection>();
  private closed = false;

  constructor(private readonly options: RelayConnectionOptions) {}

  /**
   * Sends one message and resolves with the relay's final reply. An aborted send closes its
   * connection at once (the caller has already given up on it).
   */
  async send(envelope: SmtpEnvelope, raw: Buffer, deadline: Deadline): Promise<string> {
    // A connection the relay dropped while it was idle fails before a byte of the message is
    // sent: the message goes on the next idle connection, or a new one.
    for (let connection = this.idle.pop(); connection !== undefined; connection = this.idle.pop()) {
      deadline.silent = false;
      deadline.unanswered = false;
      deadline.greeted = true;
      const outcome = await this.transmit(connection, envelope, raw, deadline);
      if (outcome.kind !== 'stale') return this.settle(connection, outcome);
      this.discard(connection);
    }
    const connection = await this.connect(deadline);
    const outcome = await this.transmit(connection, envelope, raw, deadline);
    return this.settle(
      connection,
      outcome.kind === 'stale' ? { kind: 'failed', error: outcome.error } : outcome,
    );
  }

  /** Connects (and logs in) once, then says goodbye: the dashboard's "verify connection". */
  async verify(deadline: Deadline): Promise<void> {
    const connection = await this.connect(deadline);
    this.open.delete(connection);
    connection.quit();
  }

  /** Closes idle connections now and busy ones when their transaction ends. */
  close(): void {
    this.closed = true;
    for (const connection of this.idle.splice(0)) connection.quit();
  }

  private connect(deadline: Deadline): Promise<SMTPConnection> {
    if (this.closed) return Promise.reject(new Error('SMTP transport is closed'));
    const { auth, logins, timeoutMs } = this.options;
    // A login the relay refused lately is not tried on a new connection, nor is one opened for it.
    const held = auth === null ? null : (logins?.held() ?? null);
    if (held !== null) return Promise.reject(new SmtpDeliveryError(held));
    const connection = new CountingConnection({
      host: this.options.host,
      port: this.options.port,
      servername: this.options.servername,
      secure: this.options.secure,
      requireTLS: this.options.requireTLS,
      ignoreTLS: this.options.ignoreTLS,
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
      dnsTimeout: timeoutMs,
    });
    this.open.add(connection);
    return new Promise((resolve, reject) => {
      let settled = false;
      let stopListening = () => {};
      // A login waiting for the relay's answer ends with the connection: another connection's
      // login may be waiting for it (login-gate.ts), and nodemailer may never call it back.
      let abandonLogin = (_error: Error) => {};
      const fail = (error: Error) => {
        abandonLogin(error);
        this.forget(connection);
        if (settled) return;
        settled = true;
        stopListening();
        const greeted = greetingCame(connection, error);
        const silent = !greeted && silentOn(connection);
        const unanswered = !greeted && unansweredOn(connection);
        deadline.greeted = greeted;
        deadline.silent = silent;
        deadline.unanswered = unanswered;
        connection.close();
        reject(Object.assign(error, { greeted, silent, unanswered }));
      };
      const abort = () => fail(aborted());
      const ready = () => {
        if (settled) return;
        settled = true;
        stopListening();
        deadline.silent = false;
        deadline.unanswered = false;
        deadline.greeted = true;
        resolve(connection);
      };
      // For the connection's whole life: an unheard 'error' would end the process. A connection
      // that fails or ends while idle leaves the pool.
      connection.on('error', fail);
      connection.once('end', () =>
        fail(Object.assign(new Error('Connection closed'), { code: 'ECONNECTION' })),
      );
      if (deadline.aborted) return abort();
      stopListening = deadline.onAbort(abort);
      connection.connect((error) => {
        if (error) return fail(error);
        // As nodemailer's own transports do: a relay that offers no AUTH is not sent the login.
        if (auth === null || !connection.allowsAuth) return ready();
        const login = () =>
          new Promise<void>((loggedIn, refused) => {
            // Given up on while it waited for another connection's login.
            if (settled) return refused(aborted());
            abandonLogin = refused;
            connection.login({ credentials: { user: auth.user, pass: auth.pass } }, (failure) =>
              failure ? refused(failure) : loggedIn(),
            );
          });
        (logins === undefined
          ? login()
          : logins.login(login, refusedCredentials, (error) => classifySmtpError(error))
        ).then(ready, fail);
      });
    });
  }

  private transmit(
    connection: SMTPConnection,
    envelope: SmtpEnvelope,
    raw: Buffer,
    deadline: Deadline,
  ): Promise<
    | { kind: 'sent'; response: string }
    | { kind: 'failed'; error: SmtpClientError }
    | { kind: 'stale'; error: SmtpClientError }
  > {
    const message = Readable.from([raw], { objectMode: false });
    return new Promise((resolve) => {
      const abort = () => {
        deadline.sentWhole = sentWholeOn(connection, message);
        connection.close();
        resolve({ kind: 'failed', error: aborted() });
      };
      if (deadline.aborted) return abort();
      const stopListening = deadline.onAbort(abort);
      connection.send({ from: envelope.from, to: [envelope.to] }, message, (error, info) => {
        stopListening();
        if (!error) return resolve({ kind: 'sent', response: String(info?.response ?? '250 OK') });
        const stale = !message.readableDidRead && connectionLost(error);
        resolve({
          kind: stale ? 'stale' : 'failed',
          error: Object.assign(error, { sentWhole: sentWholeOn(connection, message) }),
        });
      });
    });
  }

  /** Puts the connection back for the next message, or closes it; returns the reply or throws. */
  private settle(
    connection: SMTPConnection,
    outcome: { kind: 'sent'; response: string } | { kind: 'failed' | 'stale'; error: SmtpClientError },
  ): string {
    if (outcome.kind === 'sent') {
      this.release(connection);
      return outcome.response;
    }
    const { error } = outcome;
    if ((error.code === 'EENVELOPE' || error.code === 'EMESSAGE') && error.responseCode !== 421) {
      // The relay refused this message; the connection is fine once the session is reset.
      connection.reset((failure) => (failure ? this.discard(connection) : this.release(connection)));
    } else {
      this.discard(connection);
    }
    throw error;
  }

  private release(connection: SMTPConnection): void {
    if (this.closed || !this.open.has(connection)) this.discard(connection);
    else this.idle.push(connection);
  }

  private discard(connection: SMTPConnection): void {
    this.forget(connection);
    connection.close();
  }

  private forget(connection: SMTPConnection): void {
    this.open.delete(connection);
    const at = this.idle.indexOf(connection);
    if (at >= 0) this.idle.splice(at, 1);
  }
}
