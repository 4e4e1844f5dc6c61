import { isIP } from 'node:net';
import { parseMailbox } from './address.js';

/**
 * How failed dashboard logins are throttled. Only failures count, in fixed 15-minute windows, and
 * the strictest limit is per account *from one client*: a stranger who guesses at an admin's email
 * from elsewhere cannot lock that admin out, and a stranger still gets at most 10 guesses at an
 * account per window from one client, 30 in all from one client, and, from every client together,
 * 100 at one account (what a botnet could try, or do to an account's own logins).
 */
export const LOGIN_WINDOW_MS = 15 * 60_000;

export const LOGIN_LIMITS = {
  accountFromClient: 10,
  client: 30,
  account: 100,
} as const;

export type LoginKeyKind = keyof typeof LOGIN_LIMITS;

/**
 * The account an attempt is at, as logins compare emails: trimmed and lowercased, so `VICTIM@x `
 * and `victim@x` are one account. What is not an address is kept (bounded) as typed, lowercased.
 */
export function loginAccount(email: string): string {
  const trimmed = email.trim();
  const mailbox = parseMailbox(trimmed);
  const address = mailbox !== null && mailbox.name === undefined ? mailbox.address : trimmed;
  return address.toLowerCase().slice(0, 320);
}

/** The eight 16-bit groups of a valid IPv6 address (a trailing dotted quad counts as two). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase().replace(/%.*$/, '');
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const part = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The client an attempt comes from: its IPv4 address, or the /64 network of its IPv6 address (one
 * host is usually given a whole /64, so counting single IPv6 addresses would count nothing).
 */
export function loginClient(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const g = ipv6Groups(ip);
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff)
    return `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}

/** The throttle keys of one attempt, by kind. */
export function loginKeys(email: string, ip: string): Record<LoginKeyKind, string> {
  const account = loginAccount(email);
  const client = loginClient(ip);
  return {
    accountFromClient: `account-client\n${account}\n${client}`,
    client: `client\n${client}`,
    account: `account\n${account}`,
  };
}

/**
 * Seconds until an attempt may be made, given the failures counted in each key's current window;
 * null when it may be made now.
 */
export function loginRefusal(
  counted: readonly {
    readonly kind: LoginKeyKind;
    readonly failures: number;
    readonly windowStartedAt: number;
  }[],
  now: number,
): number | null {
  let until = 0;
  for (const { kind, failures, windowStartedAt } of counted)
    if (failures >= LOGIN_LIMITS[kind]) until = Math.max(until, windowStartedAt + LOGIN_WINDOW_MS);
  return until > now ? Math.max(1, Math.ceil((until - now) / 1000)) : null;
}
