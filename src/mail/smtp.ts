import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import {
  isInternalAddress,
  OPEN_OUTBOUND,
  outboundRefusal,
  type OutboundPolicy,
} from '../domain/outbound.js';
import type { DeliveryFailure } from '../domain/attempt.js';
import { Deadline } from './deadline.js';
import { greetedBefore, RelayPool, sentWholeBefore, silentBefore, unansweredBefore } from './relay-pool.js';
import { smtpTargetKey, type SmtpTarget } from './smtp-target.js';
import { oneLine } from '../domain/one-line.js';
import { urlHost } from '../domain/url-host.js';

/**
 * Sends pre-built messages over SMTP: a pool of open connections per relay and login
 * (relay-pool.ts), one deadline per transaction, outbound address rules, and the classification
 * of failures. Messages arrive already composed (mime.ts) and go out as they are.
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

export class SmtpDeliveryError extends Error {
  override name = 'SmtpDeliveryError';
  constructor(readonly failure: DeliveryFailure) {
    super(failure.message);
  }
}

interface NodemailerError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  /** OpenSSL's reason, on a TLS error. */
  reason?: string;
}

export const NOT_SMTP = 'not an SMTP server';
export const DEADLINE_EXCEEDED = 'SMTP transaction did not finish within the deadline';
export const NOT_TLS =
  'The relay does not take TLS on connect (smtps://, security=tls): it answered in plain text. ' +
  'Use smtp://, which upgrades with STARTTLS (usually on port 587 or 25)';

/**
 * A relay that took the connection and then sent not a byte until the deadline: a firewall or
 * proxy that holds connections, a server too busy to answer, or one that waits for TLS first.
 * Said as such, where "did not finish" would leave the reader guessing how far it got.
 */
export function silentRelay(target: Pick<SmtpTarget, 'host' | 'port'>, timeoutMs: number): string {
  return (
    `The relay at ${urlHost(target.host)}:${target.port} accepted the connection ` +
    `but sent no greeting before the ${timeoutMs / 1000} s deadline`
  );
}

/**
 * A relay whose address never took the connection before the deadline: a firewall that drops it,
 * or a host that is down. Said as such, where "did not finish" would suggest the relay was
 * reached. At port 25 of a relay outside the local networks the usual cause is named: many
 * hosting providers drop outbound port 25.
 */
export function unansweredRelay(target: Pick<SmtpTarget, 'host' | 'port'>, timeoutMs: number): string {
  // A name without a dot (localhost, a container's service name) is a local network's.
  const local = isIP(target.host) !== 0 ? isInternalAddress(target.host) : !target.host.includes('.');
  const port25 =
    target.port === 25 && !local
      ? "; many hosting providers block outbound port 25, where a relay's submission port (587, or 465 with smtps://) passes"
      : '';
  return (
    `Could not connect to the relay at ${urlHost(target.host)}:${target.port} ` +
    `within the ${timeoutMs / 1000} s deadline: nothing answered (a firewall may be dropping the connection${port25})`
  );
}

/**
 * A relay that was sent the whole message and did not confirm it before the deadline: it may
 * have taken the message, and the retry may deliver it again (RFC 5321 §4.5.3.2.6 gives the reply
 * to the final dot up to ten minutes; a relay that scans content can take longer than Herald waits).
 */
export function unconfirmedMessage(timeoutMs: number): string {
  return (
    `The relay was sent the whole message and did not confirm it within the ${timeoutMs / 1000} s ` +
    'deadline: it may have been delivered, and a retry may deliver it again'
  );
}

/**
 * The system's code for why a connection failed: nodemailer files it as `originalCode` when it
 * gives the error its own (`ESOCKET`, `EDNS`), and a connection tried on every address of a name
 * fails with an AggregateError whose errors carry it.
 */
function causeOf(error: unknown): string | null {
  const err = (error ?? {}) as { originalCode?: unknown; code?: unknown; errors?: unknown };
  if (typeof err.originalCode === 'string') return err.originalCode;
  if (Array.isArray(err.errors)) {
    const coded = err.errors.find(
      (inner: unknown) => typeof (inner as { code?: unknown })?.code === 'string',
    );
    if (coded !== undefined) return (coded as { code: string }).code;
  }
  return typeof err.code === 'string' ? err.code : null;
}

/**
 * A connection the relay's address refused, or a relay name that does not resolve, said with the
 * relay's address where Node's words (`connect ECONNREFUSED 127.0.0.1:2525`) would leave the reader
 * to decode them; the code stays at the end, to search for. Null for any other failure.
 */
export function unreachedRelay(error: unknown, target: Pick<SmtpTarget, 'host' | 'port'>): string | null {
  const cause = causeOf(error);
  switch (cause) {
    case 'ECONNREFUSED':
      return `The relay at ${urlHost(target.host)}:${target.port} refused the connection: nothing listens on that port, or a firewall rejects it (ECONNREFUSED)`;
    case 'ENOTFOUND':
    case 'ENODATA':
      return `The relay's host name ${target.host} does not resolve: no such name in DNS (${cause})`;
    case 'EAI_AGAIN':
      return `The relay's host name ${target.host} could not be looked up: DNS did not answer (EAI_AGAIN)`;
    default:
      return null;
  }
}

/**
 * A relay's reply is kept in error_message, in every attempt and in the log: a relay that answers
 * with megabytes must not make every one of those megabytes long.
 */
const MAX_REPLY_CHARS = 1000;

function bounded(text: string): string {
  return text.length <= MAX_REPLY_CHARS ? text : `${text.slice(0, MAX_REPLY_CHARS)}… (cut)`;
}

/**
 * Relays answer 4xx for "try later" and 5xx for "never"; network failures are always worth a retry.
 * `security` is how the connection was made (TLS on connect, or not).
 */
export function classifySmtpError(error: unknown, security?: SmtpTarget['security']): DeliveryFailure {
  const err = (error ?? {}) as NodemailerError;
  // A peer that never gave a valid SMTP greeting may be any service (a cache, a message bus): its
  // bytes are never echoed to the dashboard or the API, and it is not worth a retry.
  // A greeting that is a well-formed SMTP reply other than 220 (421 busy, 554 no service) is an
  // SMTP server's answer and judged by its code like any other reply.
  const greeting = /^([45]\d\d)[ -]/.exec(err.response ?? '');
  if (
    greeting === null &&
    err.command === 'CONN' &&
    (err.code === 'EPROTOCOL' || /invalid greeting/i.test(err.message ?? ''))
  ) {
    return { kind: 'permanent', message: NOT_SMTP, smtpCode: null };
  }
  const code =
    typeof err.responseCode === 'number' ? err.responseCode : greeting !== null ? Number(greeting[1]) : null;
  // STARTTLS refused, where the settings require it (`starttls`, or `auto` with credentials): a
  // fault of the relay's settings against ours, not of the message, so no reply code to read a
  // bounce from; a 4xx may pass, a 5xx will not without a change of settings.
  if (err.command === 'STARTTLS' && code !== null && code >= 400) {
    return {
      kind: code >= 500 ? 'permanent' : 'transient',
      message: bounded(
        `The relay refused STARTTLS (${oneLine(err.response ?? '')}), which these SMTP settings require ` +
          '(security=starttls, or auto with a user): if it takes TLS on connect, use security=tls',
      ),
      smtpCode: null,
      command: 'STARTTLS',
    };
  }
  if (code !== null && code >= 400) {
    const response = oneLine(err.response ?? err.message ?? '');
    const text = response.startsWith(String(code)) ? response : `${code} ${response}`;
    return {
      kind: code >= 500 ? 'permanent' : 'transient',
      message: bounded(`SMTP ${text}`),
      smtpCode: code,
      command: err.command ?? null,
    };
  }
  // TLS on connect to a relay that speaks plain SMTP first: OpenSSL reads its greeting as a TLS
  // record, and its own words (a library's file and line) would tell the reader nothing. After
  // STARTTLS the same error means the relay agreed to TLS and did not start it: no advice fits.
  if (security === 'tls' && /wrong version number/i.test(`${err.reason ?? ''} ${err.message ?? ''}`))
    return { kind: 'transient', message: NOT_TLS, smtpCode: null, command: err.command ?? null };
  // A connection tried on every address of a name fails with an AggregateError without words.
  const cause = causeOf(error);
  const words =
    typeof err.message === 'string' && err.message !== ''
      ? err.message
      : typeof error !== 'object' || error === null
        ? String(error)
        : cause !== null && cause !== err.code
          ? `Connection failed: ${cause}`
          : 'Connection failed';
  const message = oneLine(words);
  // Envelope and message errors without a reply code are Herald's own input problems.
  const permanent = err.code === 'EENVELOPE' || err.code === 'EMESSAGE';
  const label = bounded(err.code ? `${message} (${err.code})` : message);
  return {
    kind: permanent ? 'permanent' : 'transient',
    message: label,
    smtpCode: null,
    command: err.command ?? null,
  };
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

  private async relayPool(target: SmtpTarget): Promise<RelayPool> {
    return new RelayPool({
      ...(await this.endpoint(target)),
      port: target.port,
      secure: target.security === 'tls',
      // Credentials never travel in clear unless `none` was chosen explicitly: with a login, `auto`
      // requires STARTTLS.
      requireTLS: target.security === 'starttls' || (target.security === 'auto' && target.username !== null),
      ignoreTLS: target.security === 'none',
      auth: target.username === null ? null : { user: target.username, pass: target.password ?? '' },
      // Every phase is bounded, so a relay that stops answering cannot hold a worker's lane forever.
      timeoutMs: this.options.timeoutMs,
    });
  }

  private async createPool(target: SmtpTarget): Promise<Pool> {
    return { relay: await this.relayPool(target), createdAt: Date.now(), pending: 0, retired: false };
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
      throw new SmtpDeliveryError({
        ...failure,
        ...(unreached !== null && { message: unreached }),
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

  /** Opens a connection, authenticates if configured, and closes it: the dashboard's "verify". */
  async verify(target: SmtpTarget): Promise<void> {
    await this.withDeadline(target, async (deadline) => {
      const relay = await this.relayPool(target);
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
