import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { Services } from '../../src/compose.js';
import type { StatusBody } from '../../src/services/notifications.js';
import { waitUntil } from './wait.js';

/** Small helpers for the HTTP contract suites: requests through `app.inject`, assertions on errors. */

export const SEND_PATH = '/api/v1/notifications';

export function bearer(apiKey: string): Record<string, string> {
  return { authorization: `Bearer ${apiKey}` };
}

/** POST /api/v1/notifications with a JSON body (an object is serialized, a string is sent as is). */
export function send(
  app: FastifyInstance,
  apiKey: string | null,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const options: InjectOptions = {
    method: 'POST',
    url: SEND_PATH,
    headers: {
      'content-type': 'application/json',
      ...(apiKey === null ? {} : bearer(apiKey)),
      ...headers,
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  };
  return app.inject(options);
}

/** GET /api/v1/notifications/{request_id}. */
export function getStatus(
  app: FastifyInstance,
  apiKey: string | null,
  requestId: string,
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'GET',
    url: `${SEND_PATH}/${encodeURIComponent(requestId)}`,
    headers: apiKey === null ? {} : bearer(apiKey),
  });
}

/** The status body of a notification that must exist. */
export async function statusOf(app: FastifyInstance, apiKey: string, requestId: string): Promise<StatusBody> {
  const response = await getStatus(app, apiKey, requestId);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<StatusBody>();
}

/** Waits until a notification has left `queued` (sent or failed) and returns its status body. */
export function settledStatus(app: FastifyInstance, apiKey: string, requestId: string): Promise<StatusBody> {
  return waitUntil(
    async () => {
      const body = await statusOf(app, apiKey, requestId);
      return body.status === 'queued' ? undefined : body;
    },
    { what: `notification ${requestId} to leave queued` },
  );
}

export interface SendBody {
  id: number;
  request_id: string;
  status: string;
  message: string;
}

/** Sends a valid request and returns its 202 body; fails the test otherwise. */
export async function sendOk(
  app: FastifyInstance,
  apiKey: string,
  body: Record<string, unknown> = { template: 'user_created', to: 'jane@example.org' },
  headers: Record<string, string> = {},
): Promise<SendBody> {
  const response = await send(app, apiKey, body, headers);
  expect(response.statusCode, response.body).toBe(202);
  return response.json<SendBody>();
}

/** A JSON error response: the status, a JSON content type, and a body that is exactly `{error}`. */
export function expectError(response: LightMyRequestResponse, status: number, error?: string | RegExp): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/json\b/);
  const body = response.json<Record<string, unknown>>();
  // `{"error"}`, and a `hint` beside it where the fixed words cannot say what to change.
  expect(Object.keys(body).filter((key) => key !== 'hint')).toEqual(['error']);
  expect(typeof body.error).toBe('string');
  if ('hint' in body) expect(typeof body.hint).toBe('string');
  if (typeof error === 'string') expect(body.error).toBe(error);
  else if (error !== undefined) expect(body.error).toMatch(error);
}

/** The spec's not-found page: 404, HTML, and not a JSON body. */
export function expectNotFoundPage(response: LightMyRequestResponse): void {
  expect(response.statusCode, response.body).toBe(404);
  expect(response.headers['content-type']).toMatch(/^text\/html\b/);
  expect(() => JSON.parse(response.body) as unknown).toThrow();
}

/** Stored notifications, of one project or of all. */
export async function countNotifications(services: Services, projectId?: number): Promise<number> {
  let query = services.storage.db.selectFrom('notifications').select((eb) => eb.fn.countAll().as('n'));
  if (projectId !== undefined) query = query.where('project_id', '=', projectId);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The placeholder values stored for a notification. */
export async function storedData(services: Services, requestId: string): Promise<Record<string, unknown>> {
  const { notification } = await services.notifications.detail(requestId);
  return JSON.parse(notification.data) as Record<string, unknown>;
}

/** Epoch seconds of the end of the UTC calendar window that holds `now` (computed independently). */
export function windowEndSeconds(period: 'hour' | 'day' | 'month', now: number): number {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const end =
    period === 'month'
      ? Date.UTC(y, m + 1, 1)
      : period === 'day'
        ? Date.UTC(y, m, d.getUTCDate() + 1)
        : Date.UTC(y, m, d.getUTCDate(), d.getUTCHours() + 1);
  return end / 1000;
}
