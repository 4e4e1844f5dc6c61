import type { Mailbox } from './address.js';
import { parseMailbox } from './address.js';
import { errors } from './errors.js';

/**
 * The send request as the domain sees it, checked in the order the product fixes:
 * `template`, then `type`, then `to`, then the placeholder objects.
 */

export const MAX_TEMPLATE_NAME_LENGTH = 200;
/** `data` and `variables` nest at most this deep (the object itself is level 1). */
export const MAX_PLACEHOLDER_DEPTH = 32;

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

/**
 * What makes a placeholder object unstorable: nesting deeper than MAX_PLACEHOLDER_DEPTH (it could
 * not even be serialized safely), or a NUL character in a key or string, which not every store
 * keeps. Walked without recursion, so no input can exhaust the stack.
 */
function placeholderProblem(value: object): string | null {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\0')) return 'contains a NUL character';
      continue;
    }
    if (typeof current !== 'object' || current === null) continue;
    if (depth > MAX_PLACEHOLDER_DEPTH) return `nested deeper than ${MAX_PLACEHOLDER_DEPTH} levels`;
    for (const [key, child] of Object.entries(current)) {
      if (key.includes('\0')) return 'contains a NUL character';
      stack.push([child, depth + 1]);
    }
  }
  return null;
}

function placeholderObject(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw errors.invalidField(`Invalid '${field}' (must be a JSON object)`);
  const problem = placeholderProblem(value);
  if (problem !== null) throw errors.invalidField(`Invalid '${field}' (${problem})`);
  return value;
}

export function parseSendRequest(body: unknown): SendRequest {
  const fields = isPlainObject(body) ? body : {};

  const template = fields.template;
  if (
    typeof template !== 'string' ||
    template.trim() === '' ||
    template.length > MAX_TEMPLATE_NAME_LENGTH ||
    template.includes('\0')
  ) {
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
