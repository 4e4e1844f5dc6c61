import { isIP } from 'node:net';
import type { DeliveryFailure } from '../domain/attempt.js';
import { oneLine } from '../domain/one-line.js';
import { isInternalAddress } from '../domain/outbound.js';
import { urlHost } from '../domain/url-host.js';
import type { SmtpTarget } from './smtp-target.js';

/**
 * What an SMTP failure is called and how it is judged: a relay's reply read by its code, and the
 * failures without one (a relay that was never reached, never greeted, never confirmed a message)
 * said in words that name the relay and what it did, because these words are what a project's
 * developer reads in the dashboard, the API and the webhooks.
 */
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

export function bounded(text: string): string {
  return text.length <= MAX_REPLY_CHARS ? text : `${text.slice(0, MAX_REPLY_CHARS)}… (cut)`;
}

/** A refusal of the login Herald gave (its AUTH command), or a demand for one (530, RFC 4954 §6). */
function refusedLogin(err: NodemailerError, code: number): boolean {
  return gaveLogin(err) || code === 530;
}

function gaveLogin(err: NodemailerError): boolean {
  return err.code === 'EAUTH' || /^AUTH\b/i.test(err.command ?? '');
}

/**
 * The relay refused the user and password Herald gave (`535`, RFC 4954 §6): the same login will be
 * refused again until the settings (or the account at the relay) change (login-gate.ts).
 */
export function refusedCredentials(error: unknown): boolean {
  const err = (error ?? {}) as NodemailerError;
  return err.responseCode === 535 && gaveLogin(err);
}

/** What to check: the login Herald gave, or, where the relay wants one first, login and TLS. */
function loginAdvice(err: NodemailerError): string {
  return gaveLogin(err)
    ? "the relay refused Herald's login: check the SMTP user and password"
    : 'the relay wants a login, or TLS, first: check the SMTP user, password and security';
}

/**
 * OpenSSL's reason for a failed handshake (`wrong version number`), from the error's `reason` or
 * its message (`…:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/…`).
 */
function openSslReason(err: NodemailerError): string | null {
  if (typeof err.reason === 'string' && err.reason !== '') return err.reason;
  return /SSL routines:[^:]*:([^:]+)/.exec(err.message ?? '')?.[1] ?? null;
}

const REPLY_LINE = /^(\d{3})[- ]((?:[245]\.\d{1,3}\.\d{1,3} )?)/;

/**
 * A multi-line reply (`550-5.7.1 Message rejected` / `550 5.7.1 see https://…`) as one line: its
 * code and enhanced status once, then the text of each line, instead of the codes repeated
 * between the words. Anything else as it is.
 */
export function oneReply(response: string): string {
  const lines = response.split(/\r?\n/).filter((line) => line !== '');
  if (lines.length < 2 || !lines.every((line) => REPLY_LINE.test(line))) return response;
  const [, code, status] = REPLY_LINE.exec(lines[0]!)!;
  return `${code} ${status}${lines.map((line) => line.replace(REPLY_LINE, '')).join(' ')}`;
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
  // fault of the relay's settings against ours, not of the message. Like a refused login it is
  // transient, whatever the code, so the fallback takes the message at once, or it waits for the
  // back-off, and mail queued while the settings are fixed is not lost. The reply code is kept (a
  // 5xx leaves the relay's window as it is) and read as the sender's refusal, never a recipient's.
  if (err.command === 'STARTTLS' && code !== null && code >= 400) {
    return {
      kind: 'transient',
      message: bounded(
        `The relay refused STARTTLS (${oneLine(oneReply(err.response ?? ''))}), which these SMTP settings require ` +
          '(security=starttls, or auto with a user): if it takes TLS on connect, use security=tls; ' +
          'if it has no TLS at all, security=none sends the login in clear, for a network you trust',
      ),
      smtpCode: code,
      command: 'STARTTLS',
    };
  }
  if (code !== null && code >= 400) {
    const response = oneLine(oneReply(err.response ?? err.message ?? ''));
    const text = response.startsWith(String(code)) ? response : `${code} ${response}`;
    // The relay refused Herald's login (535), or wants one (530): a fault of these settings, not of
    // the message, which goes through the fallback at once, or again after the back-off, so that
    // fixing a password loses no mail (as Postfix's smtp_sasl_auth_soft_bounce does).
    if (refusedLogin(err, code))
      return {
        kind: 'transient',
        message: bounded(`SMTP ${text} (${loginAdvice(err)})`),
        smtpCode: code,
        command: err.command ?? null,
      };
    return {
      kind: code >= 500 ? 'permanent' : 'transient',
      message: bounded(`SMTP ${text}`),
      smtpCode: code,
      command: err.command ?? null,
    };
  }
  // TLS on connect to a relay that speaks plain SMTP first: OpenSSL reads its greeting as a TLS
  // record, and its own words (a library's file and line) would tell the reader nothing. After
  // STARTTLS the same error means the relay agreed to TLS and did not start it: no advice fits,
  // but OpenSSL's reason alone says what happened.
  const tls = openSslReason(err);
  if (tls !== null)
    return {
      kind: 'transient',
      message:
        security === 'tls' && /wrong version number/i.test(tls)
          ? NOT_TLS
          : bounded(
              `The TLS handshake with the relay failed${security === 'tls' ? '' : ' after it agreed to STARTTLS'}: ${tls}`,
            ),
      smtpCode: null,
      command: err.command ?? null,
    };
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
