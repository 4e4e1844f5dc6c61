import type { Mailbox } from './address.js';
import { parseMailbox } from './address.js';
import { errors } from './errors.js';

/**
 * The send request as the domain sees it, checked in the order the product fixes:
 * `template`, then `type`, then `to`, then the placeholder objects.
 */

export const MAX_TEMPLATE_NAME_LENGTH = 200;

export interface SendRequest {
  readonly template: string;
  /** null: no recipient given, so the project's contact email is used. */
  readonly to: Mailbox | null;
  readonly data: Readonly<Record<string, unknown>>;
  readonly type: 'email';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function placeholderObject(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw errors.invalidField(`Invalid '${field}' (must be a JSON object)`);
  return value;
}

export function parseSendRequest(body: unknown): SendRequest {
  const fields = isPlainObject(body) ? body : {};

  const template = fields.template;
  if (typeof template !== 'string' || template.trim() === '' || template.length > MAX_TEMPLATE_NAME_LENGTH) {
    throw errors.invalidTemplate();
  }

  if (fields.type !== undefined && fields.type !== 'email') throw errors.invalidType();

  let to: Mailbox | null = null;
  if (fields.to !== undefined && fields.to !== null && fields.to !== '') {
    to = typeof fields.to === 'string' ? parseMailbox(fields.to) : null;
    if (to === null) throw errors.invalidRecipient();
  }

  // Both objects may be sent: they are merged and `data` wins on a shared key.
  const variables = placeholderObject(fields.variables, 'variables');
  const data = placeholderObject(fields.data, 'data');
  return { template, to, data: { ...variables, ...data }, type: 'email' };
}
