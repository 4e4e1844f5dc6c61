import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { Services } from '../../src/compose.js';

/** The management API through `app.inject`, with an admin token (product.md §13). */

export const ADMIN = '/api/v1/admin';

export interface AdminClient {
  readonly token: string;
  get(path: string): Promise<LightMyRequestResponse>;
  delete(path: string): Promise<LightMyRequestResponse>;
  post(path: string, body?: unknown): Promise<LightMyRequestResponse>;
  put(path: string, body: unknown): Promise<LightMyRequestResponse>;
  patch(path: string, body: unknown): Promise<LightMyRequestResponse>;
}

/** A new admin token (created as `herald token create` does) and a client that sends it. */
export async function adminClient(
  app: FastifyInstance,
  services: Services,
  name = `test-${Math.random().toString(36).slice(2, 8)}`,
): Promise<AdminClient> {
  const { secret } = await services.adminTokens.create(name);
  return clientWith(app, secret);
}

/** A client sending `token` (any string: a wrong one, a project's key). */
export function clientWith(app: FastifyInstance, token: string): AdminClient {
  const headers = { authorization: `Bearer ${token}` };
  const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown) =>
    app.inject({
      method,
      url: `${ADMIN}${path}`,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      ...(body !== undefined && { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
  return {
    token,
    get: (path) => call('GET', path),
    delete: (path) => call('DELETE', path),
    post: (path, body) => call('POST', path, body),
    put: (path, body) => call('PUT', path, body),
    patch: (path, body) => call('PATCH', path, body),
  };
}

/** A JSON body of a success; the test fails with the body otherwise. */
export function ok<T = Record<string, unknown>>(response: LightMyRequestResponse, status = 200): T {
  expect(response.statusCode, response.body).toBe(status);
  return response.json<T>();
}

/** What the services (and so the CLI and the dashboard) say for an input they refuse. */
export async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('the service accepted it');
}
