import { parseMailbox } from './address.js';
import { clientNetwork } from './client-network.js';

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

/** The throttle keys of one attempt, by kind. */
export function loginKeys(email: string, ip: string): Record<LoginKeyKind, string> {
  const account = loginAccount(email);
  const client = clientNetwork(ip);
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
