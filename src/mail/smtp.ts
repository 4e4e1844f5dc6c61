import nodemailer, { type Transporter } from 'nodemailer';
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

/** Relays answer 4xx for "try later" and 5xx for "never"; network failures are always worth a retry. */
export function classifySmtpError(error: unknown): DeliveryFailure {
  const err = (error ?? {}) as NodemailerError;
  // A peer that never gave a valid SMTP greeting may be any service (a cache, a message bus): its
  // bytes are never echoed to the dashboard or the API, and it is not worth a retry.
  if (err.command === 'CONN' && (err.code === 'EPROTOCOL' || /invalid greeting/i.test(err.message ?? ''))) {
    return { kind: 'permanent', message: NOT_SMTP, smtpCode: null };
  }
  const code = typeof err.responseCode === 'number' ? err.responseCode : null;
  if (code !== null && code >= 400) {
    const response = (err.response ?? err.message ?? '').replace(/\s+/g, ' ').trim();
    const text = response.startsWith(String(code)) ? response : `${code} ${response}`;
    return { kind: code >= 500 ? 'permanent' : 'transient', message: `SMTP ${text}`, smtpCode: code };
  }
  const message = (err.message ?? String(error)).replace(/\s+/g, ' ').trim();
  // Envelope and message errors without a reply code are Herald's own input problems.
  const permanent = err.code === 'EENVELOPE' || err.code === 'EMESSAGE';
  const label = err.code ? `${message} (${err.code})` : message;
  return { kind: permanent ? 'permanent' : 'transient', message: label, smtpCode: null };
}

function replyCode(response: string): number {
  const code = Number.parseInt(response.slice(0, 3), 10);
  return Number.isFinite(code) ? code : 250;
}

export class SmtpMailer {
  private readonly pools = new Map<string, Transporter>();

  constructor(private readonly options: SmtpOptions) {}

  private transport(target: SmtpTarget): Transporter {
    const key = smtpTargetKey(target);
    let transport = this.pools.get(key);
    if (transport === undefined) {
      transport = nodemailer.createTransport({
        ...this.connectionOptions(target),
        pool: true,
        maxConnections: this.options.maxConnections,
        maxMessages: Infinity,
      });
      this.pools.set(key, transport);
    }
    return transport;
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
    const key = smtpTargetKey(target);
    const transport = this.transport(target);
    try {
      const sending = transport.sendMail({ envelope: { from: envelope.from, to: [envelope.to] }, raw });
      const info: { response?: string } = await this.withDeadline(sending, () => {
        if (this.pools.get(key) === transport) this.pools.delete(key);
        transport.close();
      });
      const response = String(info.response ?? '250 OK');
      return { code: replyCode(response), response };
    } catch (error) {
      throw new SmtpDeliveryError(classifySmtpError(error));
    }
  }

  /** Opens a connection, authenticates if configured, and closes it: the dashboard's "verify". */
  async verify(target: SmtpTarget): Promise<void> {
    const transport = nodemailer.createTransport(this.connectionOptions(target));
    try {
      await this.withDeadline(transport.verify(), () => transport.close());
    } catch (error) {
      throw new SmtpDeliveryError(classifySmtpError(error));
    } finally {
      transport.close();
    }
  }

  close(): void {
    for (const transport of this.pools.values()) transport.close();
    this.pools.clear();
  }
}
