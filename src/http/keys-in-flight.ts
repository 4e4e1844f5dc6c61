import type { FastifyReply } from 'fastify';
import { whenResponseClosed } from './response-closed.js';

/**
 * Idempotency-Keys of the sends this process is reading or accepting, each held from before its
 * request's body is read until the response is finished or the connection closes. A retry with the
 * same key meanwhile is in flight (`409`, product.md §3) even while the first request's body is
 * still arriving; without this the retry, its body read first, would be accepted and the first
 * answered as its replay. Across processes the key's stored record (storage/idempotency.ts) does
 * the same from the moment the first body has been read.
 */
export class KeysInFlight {
  private readonly held = new Set<string>();

  /** Holds a project's `key` for the request of `reply`; false when another request holds it. */
  hold(projectId: number, key: string, reply: FastifyReply): boolean {
    const id = `${projectId}\n${key}`;
    if (this.held.has(id)) return false;
    this.held.add(id);
    whenResponseClosed(reply.raw, () => this.held.delete(id));
    return true;
  }
}
