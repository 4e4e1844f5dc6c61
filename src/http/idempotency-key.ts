import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../domain/errors.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../services/accept.js';
import { whenResponseClosed } from './response-closed.js';

/** A send's `Idempotency-Key` header on the HTTP side (product.md §3): read, checked, and held. */

/** The request's Idempotency-Key: undefined when it has none, null when its header is not one. */
export function idempotencyHeader(request: FastifyRequest): string | undefined | null {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  const key = Array.isArray(raw) ? raw[0] : raw;
  const valid =
    key !== undefined &&
    key.length > 0 &&
    key.length <= MAX_IDEMPOTENCY_KEY_LENGTH &&
    /^[\x21-\x7e]+$/.test(key);
  return valid ? key : null;
}

/** The request's Idempotency-Key, if it has one; refused with 400 when its header is not one. */
export function idempotencyKey(request: FastifyRequest): string | undefined {
  const key = idempotencyHeader(request);
  if (key === null)
    throw errors.invalidField(
      `Invalid 'Idempotency-Key' header (1–${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters)`,
    );
  return key;
}

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
