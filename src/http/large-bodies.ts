import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * How many large request bodies (sends with files, up to 15 MiB, and batches) may be in flight at
 * once, from the first byte read to the answer: in all, and per project. A body is held in memory
 * whole while it is read, checked and accepted, so without a bound a few key holders could make
 * the API hold gigabytes. Past the bound the request is refused before its body is read, as busy
 * (503 with Retry-After), which a client retries. The bound per project is under the one in all,
 * so one project's flood always leaves room for another's.
 */
export interface LargeBodyLimits {
  /** Bodies above this many bytes (or of unknown length) count as large. */
  readonly largeFrom: number;
  readonly maxInFlight: number;
  readonly maxInFlightPerKey: number;
}

export const DEFAULT_LARGE_BODY_LIMITS: LargeBodyLimits = {
  largeFrom: 256 * 1024,
  maxInFlight: 96,
  maxInFlightPerKey: 48,
};

export class LargeBodies {
  private total = 0;
  private readonly perKey = new Map<string, number>();

  constructor(private readonly limits: LargeBodyLimits = DEFAULT_LARGE_BODY_LIMITS) {}

  /** Large bodies in flight now (tests). */
  get inFlight(): number {
    return this.total;
  }

  /**
   * Admits the request's body if it is small or there is room; false when it must be refused. An
   * admitted large body holds its place until the response is finished or the connection closes.
   */
  admit(request: FastifyRequest, reply: FastifyReply, key: string): boolean {
    const length = Number(request.headers['content-length'] ?? Number.NaN);
    if (Number.isFinite(length) && length <= this.limits.largeFrom) return true;
    const mine = this.perKey.get(key) ?? 0;
    if (this.total >= this.limits.maxInFlight || mine >= this.limits.maxInFlightPerKey) return false;
    this.total++;
    this.perKey.set(key, mine + 1);
    // 'close' follows both a finished response and an aborted connection, once.
    reply.raw.once('close', () => {
      this.total--;
      const left = (this.perKey.get(key) ?? 1) - 1;
      if (left === 0) this.perKey.delete(key);
      else this.perKey.set(key, left);
    });
    return true;
  }
}
