import type { FastifyRequest } from 'fastify';
import type { GivenCredentials } from '../domain/admin-token.js';

/** Query parameters clients put keys in, where other services read them. */
const KEY_PARAMETERS = ['api_key', 'apiKey', 'apikey', 'key', 'token', 'access_token'];

/**
 * What a request carried besides a Bearer token, for the hint of its 401: the key is only ever
 * read from `Authorization: Bearer` (spec §5), never from these places.
 */
export function givenCredentials(request: FastifyRequest): GivenCredentials {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const elsewhere =
    request.headers['x-api-key'] !== undefined
      ? 'an X-API-Key header'
      : KEY_PARAMETERS.some((name) => query[name] !== undefined)
        ? 'the query string'
        : null;
  return { authorization: request.headers.authorization, elsewhere };
}
