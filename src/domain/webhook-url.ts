import { isIP } from 'node:net';
import { outboundRefusal, type OutboundPolicy } from './outbound.js';

/** The rules of a webhook endpoint's URL (product.md §5, §8). */

const MAX_URL_CHARS = 2048;

/** The host as the outbound rules and isIP see it: an IPv6 literal without its brackets. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

export function portOf(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/** Node connects to an IP-literal host without calling lookup: such a host is judged here instead. */
export function literalRefusal(url: URL, policy: OutboundPolicy): string | null {
  const host = bareHost(url);
  if (isIP(host) === 0) return null;
  return outboundRefusal(policy, { host, address: host, port: portOf(url) });
}

/**
 * Checks a webhook URL given by an admin and returns it normalized (URL.href), or throws an Error
 * whose message is safe to show. Under enforced outbound rules an IP-literal host that the rules
 * refuse is refused here already; a name is judged at connect time, on what it resolves to then.
 */
export function parseWebhookUrl(raw: string, outbound: OutboundPolicy): string {
  const text = raw.trim();
  if (text === '') throw new Error('Webhook URL is required');
  if (text.length > MAX_URL_CHARS) throw new Error(`Webhook URL is longer than ${MAX_URL_CHARS} characters`);
  // The URL parser silently drops tabs and newlines inside a URL: what was typed would not be
  // what is called.
  if (/[\s\p{Cc}]/u.test(text)) throw new Error('Webhook URL must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error('Webhook URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error('Webhook URL must start with http:// or https://');
  if (url.username !== '' || url.password !== '')
    throw new Error('Webhook URL must not contain a user name or password');
  if (url.hostname === '') throw new Error('Webhook URL has no host');
  // href keeps an empty fragment ("…/#") that `hash` reports as ''; '#' can only start a fragment.
  if (url.href.includes('#')) throw new Error('Webhook URL must not contain a #fragment');
  if (url.href.length > MAX_URL_CHARS)
    throw new Error(`Webhook URL is longer than ${MAX_URL_CHARS} characters`);
  const refusal = literalRefusal(url, outbound);
  if (refusal !== null) throw new Error(refusal);
  return url.href;
}
