/** The HTTP calls of Herald's API (spec §4, product.md §6) as the bench makes them. */
import type { Agent } from 'node:http';
import { httpRequest } from './http-client.js';

export const SEND_PATH = '/api/v1/notifications';
export const BATCH_PATH = '/api/v1/notifications/batch';

export interface SendItem {
  template: string;
  to: string;
  data: Record<string, string>;
}

/** One send of the bench: the bench template with both of its placeholders. */
export function sendItem(index = 0): SendItem {
  return {
    template: 'welcome',
    to: `user${index}@example.org`,
    data: { user_name: `Ada Lovelace ${index}`, role: 'admin' },
  };
}

/** The send body of every bench request. */
export function sendBody(index = 0): string {
  return JSON.stringify(sendItem(index));
}

/** `size` sends with consecutive indexes from `first`: one batch. */
export function batchItems(first: number, size: number): SendItem[] {
  return Array.from({ length: size }, (_, i) => sendItem(first + i));
}

export function authHeaders(apiKey: string, json: boolean): Record<string, string> {
  return json
    ? { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }
    : { Authorization: `Bearer ${apiKey}` };
}

export interface Accepted {
  id: number;
  request_id: string;
  status: string;
}

/** POST a send; anything but a 202 with a request_id is an error that says what came back. */
export async function sendNotification(
  agent: Agent,
  port: number,
  apiKey: string,
  index = 0,
): Promise<Accepted> {
  const res = await httpRequest(agent, port, 'POST', SEND_PATH, authHeaders(apiKey, true), sendBody(index));
  let body: Partial<Accepted> = {};
  try {
    body = JSON.parse(res.body) as Partial<Accepted>;
  } catch {
    // reported below
  }
  if (res.status !== 202 || typeof body.request_id !== 'string') {
    throw new Error(
      `POST ${SEND_PATH} answered ${res.status} ${res.body.slice(0, 200)} (expected 202 with request_id)`,
    );
  }
  return body as Accepted;
}

export interface Status {
  status: string;
  created_at?: string;
  sent_at?: string;
  error_message?: string;
}

export async function notificationStatus(
  agent: Agent,
  port: number,
  apiKey: string,
  requestId: string,
): Promise<Status> {
  const path = `${SEND_PATH}/${encodeURIComponent(requestId)}`;
  const res = await httpRequest(agent, port, 'GET', path, authHeaders(apiKey, false));
  if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status} ${res.body.slice(0, 200)}`);
  return JSON.parse(res.body) as Status;
}

/**
 * POST a batch (product.md §6); anything but a 202 whose body lists `size` queued notifications is
 * an error that says what came back.
 */
export async function sendBatch(
  agent: Agent,
  port: number,
  apiKey: string,
  body: string,
  size: number,
): Promise<void> {
  const res = await httpRequest(agent, port, 'POST', BATCH_PATH, authHeaders(apiKey, true), body);
  const answer = () => `POST ${BATCH_PATH} answered ${res.status} ${res.body.slice(0, 300)}`;
  if (res.status !== 202) throw new Error(`${answer()} (expected 202)`);
  let notifications: unknown;
  try {
    notifications = (JSON.parse(res.body) as { notifications?: unknown }).notifications;
  } catch {
    // reported below
  }
  if (
    !Array.isArray(notifications) ||
    notifications.length !== size ||
    !notifications.every((n) => (n as Partial<Accepted> | null)?.status === 'queued')
  ) {
    throw new Error(`${answer()} (expected ${size} notifications, each "queued")`);
  }
}
