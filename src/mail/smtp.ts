import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { OPEN_OUTBOUND, outboundRefusal, type OutboundPolicy } from '../domain/outbound.js';
import { Deadline } from './deadline.js';
import { LoginGate } from './login-gate.js';
import { greetedBefore, RelayPool, sentWholeBefore, silentBefore, unansweredBefore } from './relay-pool.js';
import {
  bounded,
  classifySmtpError,
  DEADLINE_EXCEEDED,
  silentRelay,
  SmtpDeliveryError,
  unansweredRelay,
  unconfirmedMessage,
  unreachedRelay,
} from './smtp-failures.js';
import { smtpTargetKey, type SmtpTarget } from './smtp-target.js';

/**
 * Sends pre-built messages over SMTP: a pool of open connections per relay and login
 * (relay-pool.ts), one deadline per transaction and outbound address rules; a failure is judged and
 * worded by smtp-failures.ts. Messages arrive already composed (mime.ts) and go out as they are.
 */

export interface SmtpOptions {
  readonly timeoutMs: number;
  /** Outbound address rules for project relays; open when omitted. */
  readonly outbound?: OutboundPolicy;
}

export interface Envelope {
  readonly from: string;
  readonly to: string;
}

export interface SmtpReply {
  readonly code: number;
  readonly response: string;
}

function replyCode(response: string): number {
  const code = Number.parseInt(response.slice(0, 3), 10);
  return Number.isFinite(code) ? code : 250;
}

/** How long a pool keeps the address it resolved before the name is looked up again. */
const PINNED_ADDRESS_MS = 5 * 60_000;

interface Pool {
  readonly relay: RelayPool;
  readonly createdAt: number;
  /** Messages handed to this pool and not answered yet. */
  pending: number;
  /** Replaced by a newer pool: closed once its last message is answered. */
  retired: boolean;
}

export class SmtpMailer {
  private readonly pools = new Map<string, Promise<Pool>>();
  /** Per target key, kept when a pool is replaced: a refused login stays held (login-gate.ts). */
  private readonly logins = new Map<string, LoginGate>();
  private closed = false;
  private readonly outbound: OutboundPolicy;

  constructor(private readonly options: SmtpOptions) {
    this.outbound = options.outbound ?? OPEN_OUTBOUND;
  }

  /**
   * Where to connect. A project's relay under enforced outbound rules is resolved here, each
   * address checked, and the connection pinned to the first allowed one (with the name kept for
   * TLS), so a name cannot pass the check and then resolve elsewhere at connect time. Otherwise
   * the SMTP client resolves the name itself.
   */
  private async endpoint(target: SmtpTarget): Promise<{ host: string; servername?: string }> {
    if (!this.outbound.enforce || target.trusted === true) return { host: target.host };
    const addresses = isIP(target.host)
      ? [target.host]
      : (
          await lookup(target.host, { all: true, verbatim: true }).catch((error: Error) => {
            // A name that does not resolve is a relay that cannot be reached.
            throw Object.assign(error, { greeted: false });
          })
        ).map((entry) => entry.address);
    let refusal: string | null = null;
    for (const address of addresses) {
      refusal = outboundRefusal(this.outbound, { host: target.host, address, port: target.port });
      if (refusal === null)
        return isIP(target.host) ? { host: address } : { host: address, servername: target.host };
    }
    throw new SmtpDeliveryError({
      kind: 'permanent',
      message: refusal ?? `SMTP host ${target.host} has no address`,
      smtpCode: null,
    });
  }

  /** The gate of a target's logins; none for the dashboard's verify, which always logs in. */
  private loginGate(target: SmtpTarget): LoginGate {
    const key = smtpTargetKey(target);
    let gate = this.logins.get(key);
    if (gate === undefined) {
      gate = new LoginGate();
      this.logins.set(key, gate);
    }
    return gate;
  }

  private async relayPool(target: SmtpTarget, gated: boolean): Promise<RelayPool> {
    return new RelayPool({
      ...(await this.endpoint(target)),
      port: target.port,
      secure: target.security === 'tls',
      // Credentials never travel in clear unless `none` was chosen explicitly: with a login, `auto`
      // requires STARTTLS.
      requireTLS: target.security === 'starttls' || (target.security === 'auto' && target.username !== null),
      ignoreTLS: target.security === 'none',
      auth: target.username === null ? null : { user: target.username, pass: target.password ?? '' },
      ...(gated && target.username !== null && { logins: this.loginGate(target) }),
      // Every phase is bounded, so a relay that stops answering cannot hold a worker's lane forever.
      timeoutMs: this.options.timeoutMs,
    });
  }

  private async createPool(target: SmtpTarget): Promise<Pool> {
    return { relay: await this.relayPool(target, true), createdAt: Date.now(), pending: 0, retired: false };
  }

  /**
   * The pool for a relay, with one more message counted as pending on it before it is returned,
   * so nothing can retire and close it between the look-up and the send.
   */
  private async pool(target: SmtpTarget): Promise<Pool> {
    const key = smtpTargetKey(target);
    for (;;) {
      if (this.closed) throw new Error('SMTP transport is closed');
      const entry = this.pools.get(key);
      if (entry === undefined) {
        const created = this.createPool(target);
        this.pools.set(key, created);
        // A refused or unresolvable relay is judged again by the next message.
        created.catch(() => {
          if (this.pools.get(key) === created) this.pools.delete(key);
        });
        const pool = await created;
        pool.pending++;
        return pool;
      }
      const pool = await entry.catch(() => null);
      // Another message replaced or dropped the pool meanwhile: look again.
      if (this.pools.get(key) !== entry) continue;
      if (pool === null) {
        this.pools.delete(key);
        continue;
      }
      // A pinned address is looked up again now and then; the old pool drains, then closes.
      if (this.outbound.enforce && Date.now() - pool.createdAt > PINNED_ADDRESS_MS) {
        this.pools.delete(key);
        pool.retired = true;
        if (pool.pending === 0) pool.relay.close();
        continue;
      }
      pool.pending++;
      return pool;
    }
  }

  /**
   * Bounds a whole transaction, not only each idle wait: a relay that drips one line every few
   * seconds never trips the socket timeout. At the deadline the transaction's connection is closed.
   */
  private async withDeadline<T>(target: SmtpTarget, work: (deadline: Deadline) => Promise<T>): Promise<T> {
    const deadline = new Deadline();
    let timer: NodeJS.Timeout | undefined;
    const expiry = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        deadline.abort();
        reject(Object.assign(new Error(DEADLINE_EXCEEDED), { code: 'ETIMEDOUT' }));
      }, this.options.timeoutMs);
    });
    const running = work(deadline);
    try {
      return await Promise.race([running, expiry]);
    } catch (error) {
      if (error instanceof SmtpDeliveryError) throw error;
      // What the relay's health is judged on (domain/relay-health.ts).
      const timedOut = deadline.aborted || (error as { code?: unknown } | null)?.code === 'ETIMEDOUT';
      const reached = deadline.aborted ? deadline.greeted : greetedBefore(error);
      const silent = deadline.aborted ? deadline.silent : silentBefore(error);
      const unanswered = deadline.aborted ? deadline.unanswered : unansweredBefore(error);
      const sentWhole = deadline.aborted ? deadline.sentWhole : sentWholeBefore(error);
      // Out of time on a connection never made, or made and never spoken on, whichever timer fired
      // first (the deadline, or nodemailer's timeout of the same length), or with only the
      // relay's answer to the whole message missing. Otherwise an attempt cut off at the deadline
      // reports the deadline, whatever its connection said.
      const unheard = !timedOut
        ? null
        : unanswered
          ? unansweredRelay(target, this.options.timeoutMs)
          : silent
            ? silentRelay(target, this.options.timeoutMs)
            : sentWhole
              ? unconfirmedMessage(this.options.timeoutMs)
              : null;
      const failure =
        unheard !== null
          ? { kind: 'transient' as const, message: unheard, smtpCode: null }
          : classifySmtpError(
              deadline.aborted ? Object.assign(new Error(DEADLINE_EXCEEDED), { code: 'ETIMEDOUT' }) : error,
              target.security,
            );
      // A connection refused, or a name not found, is classified as any failure to connect (its
      // command, for the relay's window) and said with the relay's address.
      const unreached = timedOut ? null : unreachedRelay(error, target);
      // nodemailer labels `CONN` a connection closed at any step, a `421` to RCPT TO as well as a
      // refused greeting: past the greeting the step is not known, and the reply is not a refusal
      // of the sending host (a bounce's `blocked`).
      const command = reached && failure.command === 'CONN' ? null : failure.command;
      throw new SmtpDeliveryError({
        ...failure,
        ...(unreached !== null && { message: unreached }),
        command,
        reached,
        timedOut,
      });
    } finally {
      clearTimeout(timer);
      running.catch(() => undefined);
    }
  }

  /** Sends one composed message; resolves with the relay's final reply, or throws SmtpDeliveryError. */
  async send(target: SmtpTarget, envelope: Envelope, raw: Buffer): Promise<SmtpReply> {
    // One deadline covers the look-up, connecting and the transaction.
    const reply = await this.withDeadline(target, async (deadline) => {
      const pool = await this.pool(target);
      try {
        // The deadline passed while the pool was being made (a slow look-up): the attempt has
        // been reported as failed and will be retried, so this one must not send after all.
        if (deadline.aborted) throw new Error(DEADLINE_EXCEEDED);
        return await pool.relay.send(envelope, raw, deadline);
      } finally {
        pool.pending--;
        if (pool.retired && pool.pending === 0) pool.relay.close();
      }
    });
    const response = bounded(reply);
    return { code: replyCode(response), response };
  }

  /**
   * Opens a connection, authenticates if configured, and closes it: the dashboard's "verify". It
   * logs in even while the workers hold a refused login back, so that a fix at the relay can be
   * checked at once.
   */
  async verify(target: SmtpTarget): Promise<void> {
    await this.withDeadline(target, async (deadline) => {
      const relay = await this.relayPool(target, false);
      if (deadline.aborted) throw new Error(DEADLINE_EXCEEDED);
      await relay.verify(deadline);
    });
  }

  /**
   * Connects to a relay judged down, waits for its greeting and says EHLO, then QUIT: whether it
   * is back (domain/relay-health.ts). No login: the relay's reachability is in question, not the
   * project's credentials. Throws SmtpDeliveryError as a send would.
   */
  async probe(target: SmtpTarget): Promise<void> {
    await this.verify({ ...target, username: null, password: null });
  }

  /** Closes every pool; sends after this fail instead of opening new connections. */
  close(): void {
    this.closed = true;
    for (const entry of this.pools.values())
      void entry.then(
        (pool) => pool.relay.close(),
        () => undefined,
      );
    this.pools.clear();
  }
}
