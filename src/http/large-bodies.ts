import type { FastifyReply, FastifyRequest } from 'fastify';
import { whenResponseClosed } from './response-closed.js';

/**
 * How many bytes of large request bodies (sends with files, up to 15 MiB each, and batches) may be
 * in flight at once, from the first byte read to the answer: in all, and per project. A body is
 * held in memory whole while it is read, checked and accepted, so without a bound a few key
 * holders could make the API hold gigabytes. A body counts with its Content-Length (one without
 * counts as the route's limit); one that declares more than the route's limit takes no room: it
 * is refused with 413 before a byte of it is read, and no wait would let it in. Past the bound the
 * request is refused before its body is read, as busy (503 with Retry-After), which a client
 * retries. The bound per project is half the one in all, so one project's flood always leaves
 * room for another's; it takes 28 sends of 10 MiB of files at once.
 */
export interface LargeBodyLimits {
  /** Bodies above this many bytes (or of unknown length) count. */
  readonly largeFrom: number;
  readonly maxBytes: number;
  readonly maxBytesPerKey: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_LARGE_BODY_LIMITS: LargeBodyLimits = {
  largeFrom: 256 * 1024,
  maxBytes: 768 * MiB,
  maxBytesPerKey: 384 * MiB,
};

export class LargeBodies {
  private total = 0;
  private readonly perKey = new Map<string, number>();

  constructor(private readonly limits: LargeBodyLimits = DEFAULT_LARGE_BODY_LIMITS) {}

  /** Bytes of large bodies in flight now (`herald_http_large_body_bytes`). */
  get inFlight(): number {
    return this.total;
  }

  /**
   * Admits the request's body if it is small, larger than its route takes (its reader refuses it
   * unread), or there is room; false when it must be refused as busy. An admitted large body holds
   * its bytes until the response is finished or the connection closes.
   */
  admit(request: FastifyRequest, reply: FastifyReply, key: string): boolean {
    const declared = Number(request.headers['content-length'] ?? Number.NaN);
    const limit = request.routeOptions.bodyLimit ?? this.limits.largeFrom;
    if (Number.isFinite(declared) && (declared <= this.limits.largeFrom || declared > limit)) return true;
    const bytes = Number.isFinite(declared) ? declared : limit;
    const mine = this.perKey.get(key) ?? 0;
    if (this.total + bytes > this.limits.maxBytes || mine + bytes > this.limits.maxBytesPerKey) return false;
    this.total += bytes;
    this.perKey.set(key, mine + bytes);
    whenResponseClosed(reply.raw, () => {
      this.total -= bytes;
      const left = (this.perKey.get(key) ?? bytes) - bytes;
      if (left <= 0) this.perKey.delete(key);
      else this.perKey.set(key, left);
    });
    return true;
  }
}
