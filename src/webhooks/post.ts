import { lookup as dnsLookup } from 'node:dns';
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { outboundRefusal, type OutboundPolicy } from '../domain/outbound.js';
import { literalRefusal, portOf } from '../domain/webhook-url.js';

/**
 * One webhook delivery attempt over node:http(s) (product.md §5, §8). This is the only module that
 * opens HTTP connections for webhooks. node:http rather than fetch, because the address a name
 * resolves to is checked in the socket's own `lookup`: the address checked is the address connected
 * to, so a name cannot pass a check and then resolve elsewhere.
 */

export interface WebhookPost {
  /** An http: or https: URL, already validated by parseWebhookUrl. */
  readonly url: string;
  /** webhook-id, webhook-timestamp, webhook-signature: sent as given. */
  readonly headers: Readonly<Record<string, string>>;
  /** JSON text. */
  readonly body: string;
}

export interface PostOptions {
  /** Total deadline of the attempt: DNS, connect, TLS, request, answer headers and the excerpt. */
  readonly timeoutMs: number;
  readonly outbound: OutboundPolicy;
  /** At most this many bytes of the answer are read and kept; default 1024. */
  readonly excerptBytes?: number;
  /**
   * How long the excerpt may take to come once the status line has arrived (within the deadline);
   * default 1000 ms. The answer is known by then: a receiver that drips its body holds no lane.
   */
  readonly excerptWaitMs?: number;
  /** Default 'Herald-Webhooks/1'. */
  readonly userAgent?: string;
}

export interface PostResult {
  /** True only for a 2xx status. */
  readonly ok: boolean;
  /** Null when there was no HTTP answer (refused, timeout, DNS, TLS, blocked). */
  readonly statusCode: number | null;
  /** From the start to the answer's status line, or to the failure. */
  readonly latencyMs: number;
  /** The answer's first excerptBytes, as text safe to display; null when there was no answer. */
  readonly excerpt: string | null;
  /** Why there was no answer, in words safe to show an admin; null whenever there was an answer. */
  readonly error: string | null;
}

const DEFAULT_EXCERPT_BYTES = 1024;
const DEFAULT_EXCERPT_WAIT_MS = 1000;
const DEFAULT_USER_AGENT = 'Herald-Webhooks/1';
/** Error texts end up in every attempt row and on the dashboard: an OpenSSL message can be long. */
const MAX_ERROR_CHARS = 300;

/** Raised from the socket's lookup, so that the refusal reaches the request's 'error' as itself. */
class OutboundRefused extends Error {
  override name = 'OutboundRefused';
}

/**
 * A socket lookup that only ever hands the socket addresses the outbound rules allow. Refused
 * addresses are dropped rather than failing the whole name (as the SMTP side pins the first allowed
 * one): the socket can only connect to what this returns, so every address it may use was checked.
 * When none is left the lookup fails with the refusal.
 */
function guardedLookup(policy: OutboundPolicy, port: number): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      let refusal: string | null = null;
      const allowed = addresses.filter((entry) => {
        const reason = outboundRefusal(policy, { host: hostname, address: entry.address, port });
        refusal ??= reason;
        return reason === null;
      });
      const first = allowed[0];
      if (first === undefined) {
        const failure =
          refusal === null
            ? Object.assign(new Error('no address'), { code: 'ENOTFOUND', syscall: 'getaddrinfo' })
            : new OutboundRefused(refusal);
        return callback(failure, []);
      }
      if (options.all === true) callback(null, allowed);
      else callback(null, first.address, first.family);
    });
  };
}

function bounded(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= MAX_ERROR_CHARS ? flat : `${flat.slice(0, MAX_ERROR_CHARS)}…`;
}

const NETWORK_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'Connection refused',
  ECONNRESET: 'Connection closed without an answer',
  EPIPE: 'Connection closed without an answer',
  EHOSTUNREACH: 'Host unreachable',
  ENETUNREACH: 'Network unreachable',
  ETIMEDOUT: 'Connection timed out',
};

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|EPROTO$)/;

interface SocketError extends Error {
  code?: string;
  syscall?: string;
  /** OpenSSL's short reason ("wrong version number"), where the error comes from OpenSSL. */
  reason?: string;
}

/** OpenSSL's reason ("wrong version number") rather than its whole line with source paths. */
function tlsReason(err: SocketError): string {
  const openssl = /error:[0-9a-f]+:[^:]*:[^:]*:([^:]+)/i.exec(err.message);
  return err.reason ?? openssl?.[1] ?? err.message;
}

/** What went wrong before any HTTP answer, in words safe to show. The peer's bytes are never echoed. */
function failureMessage(error: unknown): string {
  if (error instanceof OutboundRefused) return error.message;
  const err = (error ?? {}) as SocketError;
  const code = typeof err.code === 'string' ? err.code : '';
  if (err.syscall === 'getaddrinfo' || code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return `DNS lookup failed: ${code || 'no address'}`;
  const network = NETWORK_ERRORS[code];
  if (network !== undefined) return network;
  if (TLS_CODE.test(code)) return bounded(`TLS error: ${tlsReason(err)} (${code})`);
  // llhttp's messages quote the offending bytes; its code alone says what was wrong.
  if (code.startsWith('HPE_')) return `Not a valid HTTP answer (${code})`;
  return bounded(`Request failed: ${code || err.message || String(error)}`);
}

/** Every control character except newline and tab: the excerpt is shown on the dashboard and CLI. */
const UNSAFE_CONTROL = /(?![\n\t])\p{Cc}/gu;

/**
 * The excerpt as text. Invalid UTF-8 becomes U+FFFD. When the body was cut, a character split by
 * the cut is dropped rather than shown as U+FFFD (`stream` holds back an incomplete tail). CRLF
 * becomes LF first, so an ordinary CRLF answer does not read as a row of replacement characters.
 */
function excerptText(bytes: Buffer, cut: boolean): string {
  const text = new TextDecoder('utf-8').decode(bytes, { stream: cut });
  return text.replace(/\r\n/g, '\n').replace(UNSAFE_CONTROL, '\uFFFD');
}

/**
 * The state of one attempt. It settles exactly once: on the answer's end, on the excerpt being
 * full, on an error, when the excerpt has had its time, or at the deadline, whichever comes first;
 * settling destroys the socket.
 */
class Attempt {
  private readonly started = performance.now();
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private statusCode: number | null = null;
  private answeredAfter = 0;
  private request: ClientRequest | null = null;
  private settled = false;
  private timer: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    private readonly excerptBytes: number,
    private readonly excerptWaitMs: number,
    private readonly resolve: (result: PostResult) => void,
  ) {
    this.timer = setTimeout(() => this.expire(), timeoutMs);
  }

  private elapsed(): number {
    return Math.round(performance.now() - this.started);
  }

  attach(request: ClientRequest): void {
    this.request = request;
    // Stays attached for the request's whole life: a late error is ignored, never thrown.
    request.on('error', (error) => this.onError(error));
    request.on('response', (response) => this.onResponse(response));
  }

  private onResponse(response: IncomingMessage): void {
    this.statusCode = response.statusCode ?? null;
    this.answeredAfter = this.elapsed();
    if (this.excerptBytes <= 0) return this.answered();
    const left = this.timeoutMs - this.answeredAfter;
    if (this.excerptWaitMs < left) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.expire(), this.excerptWaitMs);
    }
    response.on('data', (chunk: Buffer) => this.keep(chunk));
    response.on('end', () => this.answered());
    // A body cut off by the peer still leaves an answer: its status and what came of its body.
    response.on('error', () => this.answered());
    response.on('close', () => this.answered());
  }

  private keep(chunk: Buffer): void {
    const room = this.excerptBytes - this.kept;
    this.chunks.push(chunk.length <= room ? chunk : chunk.subarray(0, room));
    this.kept += Math.min(chunk.length, room);
    if (this.kept >= this.excerptBytes) this.answered();
  }

  private onError(error: unknown): void {
    if (this.statusCode !== null) this.answered();
    else this.fail(failureMessage(error));
  }

  /**
   * At the deadline (or once the excerpt has had its time) an answer whose body is still coming
   * counts as an answer: the receiver gave its status line, and a 2xx means it took the event;
   * only what arrived of the body is kept.
   */
  private expire(): void {
    if (this.statusCode !== null) this.answered();
    else this.fail(`Timed out after ${this.timeoutMs} ms`);
  }

  private answered(): void {
    const status = this.statusCode ?? 0;
    this.settle({
      ok: status >= 200 && status < 300,
      statusCode: this.statusCode,
      latencyMs: this.answeredAfter,
      excerpt: excerptText(Buffer.concat(this.chunks), this.kept >= this.excerptBytes),
      error: null,
    });
  }

  fail(error: string): void {
    this.settle({ ok: false, statusCode: null, latencyMs: this.elapsed(), excerpt: null, error });
  }

  private settle(result: PostResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.request?.destroy();
    this.resolve(result);
  }
}

function requestHeaders(post: WebhookPost, userAgent: string): Record<string, string> {
  // Set last and computed here: a given content-length cannot disagree with the body sent.
  return {
    'content-type': 'application/json',
    'user-agent': userAgent,
    ...post.headers,
    'content-length': String(Buffer.byteLength(post.body)),
  };
}

/**
 * One attempt. Never throws. Never follows redirects: a 3xx is a failure like any non-2xx. Reads at
 * most excerptBytes of the answer, then destroys the socket. One connection per attempt
 * (`agent: false`), so no pooled socket outlives the attempt or carries over a checked address.
 */
export function postWebhook(post: WebhookPost, options: PostOptions): Promise<PostResult> {
  return new Promise((resolve) => {
    const attempt = new Attempt(
      options.timeoutMs,
      options.excerptBytes ?? DEFAULT_EXCERPT_BYTES,
      options.excerptWaitMs ?? DEFAULT_EXCERPT_WAIT_MS,
      resolve,
    );
    try {
      const url = new URL(post.url);
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return attempt.fail('Webhook URL must use http or https');
      const refusal = literalRefusal(url, options.outbound);
      if (refusal !== null) return attempt.fail(refusal);
      const request = (url.protocol === 'https:' ? https : http).request(url, {
        method: 'POST',
        agent: false,
        headers: requestHeaders(post, options.userAgent ?? DEFAULT_USER_AGENT),
        lookup: guardedLookup(options.outbound, portOf(url)),
      });
      attempt.attach(request);
      request.end(post.body);
    } catch (error) {
      // A URL that does not parse or a header Node refuses to send: no connection was made.
      attempt.fail(failureMessage(error));
    }
  });
}
