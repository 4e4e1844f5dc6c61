import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { ReportTarget } from './intake.js';
import { findNotificationById } from '../storage/notifications.js';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import type { Received, ReportReceiver } from './receive.js';
import { ReportParserBusy } from './report-parser.js';
import { classifyBounceAddress } from './token.js';

export interface BounceListenerOptions {
  readonly host: string;
  readonly port: number;
  /** HERALD_BOUNCE_DOMAIN: the only domain mail is accepted for. */
  readonly domain: string;
  /** The bounce token MAC key (token.ts). */
  readonly key: Buffer;
  readonly maxBytes: number;
  /** Reports per minute accepted from one client address. */
  readonly perClientPerMinute: number;
  /**
   * The longest a connection may stay open, whatever it sends (HERALD_BOUNCE_SESSION_TIMEOUT_MS):
   * the idle timeout alone lets a client drip a byte at a time for ever.
   */
  readonly sessionTimeoutMs: number;
  readonly db: Kysely<Database>;
  readonly receiver: ReportReceiver;
  readonly logger: Logger;
}

/** Recipients per report: a bounce is for one message; a handful covers MTAs that batch them. */
const MAX_RECIPIENTS = 10;
const MAX_CLIENTS = 50;
/** Connections at once from one client address: an MTA needs one or two, and one client must not hold them all. */
const MAX_CLIENTS_PER_ADDRESS = 5;

/** An SMTP reply with a chosen code, as smtp-server expects errors to carry it. */
function reply(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}

/** Sliding one-minute counts of reports per client address. */
class ClientRate {
  private readonly seen = new Map<string, number[]>();
  constructor(private readonly perMinute: number) {}

  take(client: string, now: number): boolean {
    const recent = (this.seen.get(client) ?? []).filter((t) => now - t < 60_000);
    if (recent.length >= this.perMinute) {
      this.seen.set(client, recent);
      return false;
    }
    recent.push(now);
    this.seen.set(client, recent);
    if (this.seen.size > 10_000) this.prune(now);
    return true;
  }

  private prune(now: number): void {
    for (const [client, times] of this.seen)
      if (times.every((t) => now - t >= 60_000)) this.seen.delete(client);
  }
}

/**
 * Herald's inbound SMTP listener for bounce reports and complaints (role `bounces`, product.md §5).
 * It is never a relay: RCPT TO is accepted only for `bounces+<token>@` or `bounces@` the bounce
 * domain, and a token whose MAC fails or that names no notification is refused there, before any
 * data is read. Reports are bounded in size, recipients and rate, and answered 250 only once what
 * they changed is committed (a database failure answers 451, so the sender tries again).
 */
export class BounceListener {
  private readonly server: SMTPServer;
  private readonly rate: ClientRate;
  /** Open connections per client address, and the sessions counted in it. */
  private readonly open = new Map<string, number>();
  private readonly counted = new Set<string>();

  constructor(private readonly options: BounceListenerOptions) {
    this.rate = new ClientRate(options.perClientPerMinute);
    this.server = new SMTPServer({
      name: options.domain,
      banner: 'Herald bounce intake',
      authOptional: true,
      disabledCommands: ['AUTH', 'STARTTLS'],
      size: options.maxBytes,
      maxClients: MAX_CLIENTS,
      socketTimeout: 60_000,
      closeTimeout: 5_000,
      logger: false,
      onConnect: (session, callback) => {
        const open = this.open.get(session.remoteAddress) ?? 0;
        if (open >= MAX_CLIENTS_PER_ADDRESS)
          return callback(reply(421, 'Too many connections from your address; try again later'));
        this.open.set(session.remoteAddress, open + 1);
        this.counted.add(session.id);
        callback();
      },
      onClose: (session) => {
        if (!this.counted.delete(session.id)) return;
        const left = (this.open.get(session.remoteAddress) ?? 1) - 1;
        if (left <= 0) this.open.delete(session.remoteAddress);
        else this.open.set(session.remoteAddress, left);
      },
      onMailFrom: (_address, session, callback) => {
        if (!this.rate.take(session.remoteAddress, Date.now()))
          return callback(reply(421, 'Too many reports from your address; try again later'));
        callback();
      },
      onRcptTo: (address, session, callback) => {
        this.checkRecipient(address.address, session).then(
          () => callback(),
          (error: Error) => callback(error),
        );
      },
      onData: (stream, session, callback) => {
        this.receive(stream, session).then(
          (message) => callback(null, message),
          (error: Error) => callback(error),
        );
      },
    });
    this.server.on('error', (err) => options.logger.warn({ err }, 'bounce listener error'));
    this.server.server.on('connection', (socket: Socket) => this.limitSession(socket));
  }

  /** Closes a connection at its session deadline, however busy it keeps it (421, RFC 5321 §3.8). */
  private limitSession(socket: Socket): void {
    const timer = setTimeout(() => {
      this.options.logger.info({ client: socket.remoteAddress }, 'bounce listener session deadline reached');
      socket.end(`421 4.4.2 ${this.options.domain} Session too long; closing connection\r\n`);
      socket.destroySoon();
      setTimeout(() => socket.destroy(), 1_000).unref();
    }, this.options.sessionTimeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        const address = this.server.server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : this.options.port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async checkRecipient(address: string, session: SMTPServerSession): Promise<void> {
    if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) throw reply(452, '4.5.3 Too many recipients');
    if (this.isPostmaster(address)) return;
    const target = classifyBounceAddress(this.options.key, address, this.options.domain);
    if (target.kind === 'foreign')
      throw reply(550, '5.7.1 Relaying denied: this server takes bounce reports only');
    if (target.kind === 'forged') throw reply(550, '5.1.1 Unknown bounce address');
    if (target.kind === 'token' && (await findNotificationById(this.options.db, target.id)) === undefined)
      throw reply(550, '5.1.1 Unknown bounce address');
  }

  /**
   * RFC 5321 §4.5.1: postmaster@ the domain, and `Postmaster` with no domain, must be accepted
   * (the local part in any case); such mail is read as a report without a token.
   */
  private isPostmaster(address: string): boolean {
    const lower = address.trim().toLowerCase();
    return lower === 'postmaster' || lower === `postmaster@${this.options.domain.toLowerCase()}`;
  }

  private async receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      // Past the limit the rest is read and dropped: the client gets its answer after its data.
      if (size <= this.options.maxBytes) chunks.push(chunk);
    }
    if (stream.sizeExceeded || size > this.options.maxBytes) throw reply(552, '5.3.4 Report too large');
    const targets = new Map<string, ReportTarget>();
    for (const rcpt of session.envelope.rcptTo) {
      const target = classifyBounceAddress(this.options.key, rcpt.address, this.options.domain);
      if (target.kind === 'token') targets.set(`token:${target.id}`, target);
      else if (target.kind === 'plain' || this.isPostmaster(rcpt.address))
        targets.set('plain', { kind: 'plain' });
    }
    const envelope = [...targets.keys()].sort().join(',');
    let received: Received;
    try {
      received = await this.options.receiver.receive(
        Buffer.concat(chunks),
        () => [...targets.values()],
        envelope,
      );
    } catch (err) {
      if (err instanceof ReportParserBusy) {
        this.options.logger.warn(
          { client: session.remoteAddress },
          'too many bounce reports waiting; answered 451',
        );
        throw reply(451, '4.3.2 Too many reports waiting; try again later');
      }
      this.options.logger.error({ err }, 'storing a bounce report failed');
      throw reply(451, '4.3.0 Temporary failure; try again later');
    }
    this.log(session, received);
    return '2.0.0 Report received';
  }

  private log(session: SMTPServerSession, received: Received): void {
    const client = session.remoteAddress;
    if (received.results.length === 0)
      this.options.logger.info(
        { client, report: received.kind, outcome: received.outcome },
        'bounce report ignored',
      );
    for (const result of received.results)
      this.options.logger.info(
        { client, report: received.kind, ...result },
        result.outcome === 'ignored' ? 'bounce report ignored' : 'bounce report applied',
      );
  }
}
