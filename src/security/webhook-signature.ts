import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhook signing as the Standard Webhooks specification fixes it (product.md §5), so a receiver can
 * verify with any of its libraries: the secret is `whsec_` + base64 of the key; the signature is
 * `v1,` + base64 HMAC-SHA256 over `{id}.{timestamp}.{body}`.
 */

const PREFIX = 'whsec_';

/** A new endpoint secret: 24 random bytes (192 bits), within the 24–64 bytes the spec asks for. */
export function generateWebhookSecret(): string {
  return PREFIX + randomBytes(24).toString('base64');
}

/** The signing key inside a `whsec_…` secret. */
function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

/** `v1,<base64 signature>` of one delivery. */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret))
    .update(`${id}.${timestampSeconds}.${body}`)
    .digest('base64');
  return `v1,${mac}`;
}

/** The three headers of one delivery attempt. */
export function webhookHeaders(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signWebhook(secret, id, timestampSeconds, body),
  };
}
