import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import nodemailer, { type Transporter } from 'nodemailer';
import { OPEN_OUTBOUND, outboundRefusal, type OutboundPolicy } from '../domain/outbound.js';
import type { DeliveryFailure } from '../domain/retry.js';
import { smtpTargetKey, type SmtpTarget } from './smtp-target.js';

/**
 * Sends pre-built messages over SMTP with one pooled nodemailer transport per relay. This is the
 * only module that imports nodemailer's transport; messages arrive already composed (mime.ts),
 * which avoids nodemailer building each message again on the hot path.
 */

export interface SmtpOptions {
  readonly timeoutMs: number;
  readonly maxConnections: number;
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
}

export const NOT_SMTP = 'not an SMTP server';
export const DEADLINE_EXCEEDED = 'SMTP transaction did not finish within the deadline';

/**
 * A relay's reply is kept in error_message, in every attempt and in the log: a relay that answers
 * with megabytes must not make every one of those megabytes long.
 */
const MAX_REPLY_CHARS = 1000;

function bounded(text: string): string {
  return text.length <= MAX_REPLY_CHARS ? text : `${text.slice(0, MAX_REPLY_CHARS)}… (cut)`;
}

/** Relays answer 4xx for "try later" and 5xx for "never"; network failures are always worth a retry. */
export function classifySmtpError(error: unknown): DeliveryFailure {
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
  if (code !== null && code >= 400) {
    const response = (err.response ?? err.message ?? '').replace(/\s+/g, ' ').trim();
    const text = response.startsWith(String(code)) ? response : `${code} ${response}`;
    return {
      kind: code >= 500 ? 'permanent' : 'transient',
      message: bounded(`SMTP ${text}`),
      smtpCode: code,
      command: err.command ?? null,
    };
  }
  const message = (err.message ?? String(error)).replace(/\s+/g, ' ').trim();
  // Envelope and message errors without a reply code are Herald's own input problems.
  const permanent = err.code === 'EENVELOPE' || err.code === 'EMESSAGE';
  const label = bounded(err.code ? `${message} (${err.code})` : message);
  return { kind: permanent ? 'permanent' : 'transient', message: label, smtpCode: null };
}

function replyCode(response: string): number {
  const code = Number.parseInt(response.slice(0, 3), 10);
  return Number.isFinite(code) ? code : 250;
}

/** How long a pool keeps the address it resolved before the name is looked up again. */
const PINNED_ADDRESS_MS = 5 * 60_000;

interface Pool {
  readonly transport: Transporter;
  readonly createdAt: number;
  /** Messages handed to this pool and not answered yet. */
  pending: number;
  /** Replaced by a newer pool: closed once its last message is answered. */
  retired: boolean;
  /** Closed because one of its transactions passed the deadline: the others fail for that reason. */
  timedOut: boolean;
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
   * nodemailer resolves the name itself.
   */
  private async endpoint(target: SmtpTarget): Promise<{ host: string; servername?: string }> {
    if (!this.outbound.enforce || target.trusted === true) return { host: target.host };
    const addresses = isIP(target.host)
      ? [target.host]
      : (await lookup(target.host, { all: true, verbatim: true })).map((entry) => entry.address);
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

  private async createPool(target: SmtpTarget): Promise<Pool> {
    const transport = nodemailer.createTransport({
      ...this.connectionOptions(target),
      ...(await this.endpoint(target)),
      pool: true,
      maxConnections: this.options.maxConnections,
      maxMessages: Infinity,
    });
    return { transport, createdAt: Date.now(), pending: 0, retired: false, timedOut: false };
  }

  /**
   * The pool for a relay, with one more message counted as pending on it before it is returned,
   * so nothing can retire and close it between the look-up and the send.
   */
  private async pool(target: SmtpTarget): Promise<{ key: string; entry: Promise<Pool>; pool: Pool }> {
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
        return { key, entry: created, pool };
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
        this.retire(key, entry, pool);
        continue;
      }
      pool.pending++;
      return { key, entry, pool };
    }
  }

  private retire(key: string, entry: Promise<Pool>, pool: Pool): void {
    if (this.pools.get(key) === entry) this.pools.delete(key);
    pool.retired = true;
    if (pool.pending === 0) pool.transport.close();
  }

  private connectionOptions(target: SmtpTarget) {
    return {
      host: target.host,
      port: target.port,
      secure: target.security === 'tls',
      // Credentials never travel in clear unless `none` was chosen explicitly: with a login, `auto`
      // requires STARTTLS.
      requireTLS: target.security === 'starttls' || (target.security === 'auto' && target.username !== null),
      ignoreTLS: target.security === 'none',
      auth: target.username === null ? undefined : { user: target.username, pass: target.password ?? '' },
      // Every phase is bounded, so a relay that stops answering cannot hold a worker's lane forever.
      connectionTimeout: this.options.timeoutMs,
      greetingTimeout: this.options.timeoutMs,
      socketTimeout: this.options.timeoutMs,
      dnsTimeout: this.options.timeoutMs,
      disableFileAccess: true,
      disableUrlAccess: true,
    };
  }

  /**
   * Bounds a whole transaction, not only each idle wait: a relay that drips one line every few
   * seconds never trips the socket timeout. At the deadline the relay's connections are closed.
   */
  private async withDeadline<T>(work: Promise<T>, abort: () => void): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        abort();
        reject(Object.assign(new Error(DEADLINE_EXCEEDED), { code: 'ETIMEDOUT' }));
      }, this.options.timeoutMs);
    });
    try {
      return await Promise.race([work, deadline]);
    } finally {
      clearTimeout(timer);
      work.catch(() => undefined);
    }
  }

  /** Sends one composed message; resolves with the relay's final reply, or throws SmtpDeliveryError. */
  async send(target: SmtpTarget, envelope: Envelope, raw: Buffer): Promise<SmtpReply> {
    // One deadline covers the look-up, waiting for a pooled connection and the transaction.
    let held: { key: string; entry: Promise<Pool>; pool: Pool } | null = null;
    let abandoned = false;
    const work = this.pool(target).then(async (acquired) => {
      held = acquired;
      const { pool } = acquired;
      try {
        // The deadline passed while the pool was being made (a slow look-up): the attempt has
        // been reported as failed and will be retried, so this one must not send after all.
        if (abandoned) throw new Error(DEADLINE_EXCEEDED);
        return (await pool.transport.sendMail({
          envelope: { from: envelope.from, to: [envelope.to] },
          raw,
        })) as { response?: string };
      } finally {
        pool.pending--;
        if (pool.retired && pool.pending === 0) pool.transport.close();
      }
    });
    try {
      const info = await this.withDeadline(work, () => {
        abandoned = true;
        const late = held as { key: string; entry: Promise<Pool>; pool: Pool } | null;
        if (late === null) return;
        late.pool.timedOut = true;
        this.retire(late.key, late.entry, late.pool);
        late.pool.transport.close();
      });
      const response = bounded(String(info.response ?? '250 OK'));
      return { code: replyCode(response), response };
    } catch (error) {
      if (error instanceof SmtpDeliveryError) throw error;
      // Transactions that shared a pool with one that passed the deadline are cut off with it
      // ("Connection pool was closed"); they failed for the same reason, and say so.
      const cutOff = (held as { pool: Pool } | null)?.pool.timedOut === true;
      throw new SmtpDeliveryError(
        classifySmtpError(
          cutOff ? Object.assign(new Error(DEADLINE_EXCEEDED), { code: 'ETIMEDOUT' }) : error,
        ),
      );
    }
  }

  /** Opens a connection, authenticates if configured, and closes it: the dashboard's "verify". */
  async verify(target: SmtpTarget): Promise<void> {
    let transport: Transporter | null = null;
    let abandoned = false;
    try {
      await this.withDeadline(
        this.endpoint(target).then((endpoint) => {
          if (abandoned) throw new Error(DEADLINE_EXCEEDED);
          transport = nodemailer.createTransport({ ...this.connectionOptions(target), ...endpoint });
          return transport.verify();
        }),
        () => {
          abandoned = true;
          (transport as Transporter | null)?.close();
        },
      );
    } catch (error) {
      if (error instanceof SmtpDeliveryError) throw error;
      throw new SmtpDeliveryError(classifySmtpError(error));
    } finally {
      (transport as Transporter | null)?.close();
    }
  }

  /** Closes every pool; sends after this fail instead of opening new connections. */
  close(): void {
    this.closed = true;
    for (const entry of this.pools.values())
      void entry.then(
        (pool) => pool.transport.close(),
        () => undefined,
      );
    this.pools.clear();
  }
}
