import { createHash } from 'node:crypto';
import { errors } from '../domain/errors.js';
import { urlHost } from '../domain/url-host.js';
import type { SmtpSecurity } from '../storage/schema.js';

/**
 * Where and how to reach an SMTP relay. Security: `tls` is implicit TLS (smtps, port 465),
 * `starttls` requires the STARTTLS upgrade, `auto` upgrades when the server offers it, and `none`
 * never upgrades (local relays and test sinks).
 */
export interface SmtpTarget {
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username: string | null;
  readonly password: string | null;
  /**
   * The operator's own relay (HERALD_SMTP_URL): exempt from the outbound address rules that keep
   * a project's relay, chosen by a dashboard admin, off internal addresses.
   */
  readonly trusted?: boolean;
}

export const SMTP_SECURITY: readonly SmtpSecurity[] = ['auto', 'starttls', 'tls', 'none'];

export function isSmtpSecurity(value: string): value is SmtpSecurity {
  return (SMTP_SECURITY as readonly string[]).includes(value);
}

/** `smtp://user:pass@host:port`, `smtps://…`; `?security=auto|starttls|tls|none` refines it. */
export function parseSmtpUrl(raw: string): SmtpTarget {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw errors.invalidInput('SMTP URL must look like smtp://user:pass@host:port or smtps://…');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw errors.invalidInput('SMTP URL must start with smtp:// or smtps://');
  }
  if (url.hostname === '') throw errors.invalidInput('SMTP URL needs a host');
  // A relay has no path: one is most often a password's unescaped `/` or `#`, which ends the
  // authority there and leaves the rest of the password as the host (not repeated here).
  if ((url.pathname !== '' && url.pathname !== '/') || url.hash !== '')
    throw errors.invalidInput(
      'SMTP URL has a path or a #, which a relay has no use for: in a user name or password write / as %2F and # as %23',
    );
  // A mistyped option (`?tls=none`, `?Security=none`) would otherwise leave `auto` in force unsaid.
  // The option is named only when it looks like one: a password with an unescaped `?` in it
  // makes the rest of the URL an "option", and an error must not repeat a password.
  for (const name of url.searchParams.keys())
    if (name !== 'security')
      throw errors.invalidInput(
        `SMTP URL option ${/^[A-Za-z_-]{1,20}$/.test(name) ? `'${name}' ` : ''}is not known: ` +
          'the only one is security (auto, starttls, tls, none)',
      );
  if (url.searchParams.getAll('security').length > 1)
    throw errors.invalidInput('SMTP URL gives security more than once');
  let security: SmtpSecurity = url.protocol === 'smtps:' ? 'tls' : 'auto';
  const requested = url.searchParams.get('security');
  if (requested !== null) {
    if (!isSmtpSecurity(requested))
      throw errors.invalidInput('security must be one of auto, starttls, tls, none');
    security = requested;
  }
  const port = url.port === '' ? (security === 'tls' ? 465 : 587) : Number(url.port);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    security,
    username: url.username === '' ? null : decoded(url.username, 'user name'),
    password: url.password === '' ? null : decoded(url.password, 'password'),
  };
}

/** A user name or password from the URL, its %XX escapes decoded: a `%` of its own is written `%25`. */
function decoded(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw errors.invalidInput(`SMTP URL ${what} has a % that starts no %XX escape: write a % as %25`);
  }
}

/**
 * The relay a target reaches, as `host:port` (the host lowercased, IPv6 in brackets): lanes,
 * windows and health are per relay, so one host behind several logins is one relay.
 */
export function relayKey(target: Pick<SmtpTarget, 'host' | 'port'>): string {
  return `${urlHost(target.host.toLowerCase())}:${target.port}`;
}

/** The target with its password replaced, for logs and CLI output. */
export function describeSmtpTarget(
  target: Pick<SmtpTarget, 'host' | 'port' | 'security' | 'username'>,
): string {
  const user = target.username === null ? '' : `${encodeURIComponent(target.username)}@`;
  return `${target.security === 'tls' ? 'smtps' : 'smtp'}://${user}${urlHost(target.host)}:${target.port} (security=${target.security})`;
}

/**
 * A target's key, kept with the target: a worker asks for it once per message, and the worker's
 * targets are the same objects across a batch (and the global relay's, across batches).
 */
const targetKeys = new WeakMap<SmtpTarget, string>();

/** Identifies a connection pool: targets with the same key can share connections. */
export function smtpTargetKey(target: SmtpTarget): string {
  let key = targetKeys.get(target);
  if (key === undefined) {
    key = hashTarget(target);
    targetKeys.set(target, key);
  }
  return key;
}

function hashTarget(target: SmtpTarget): string {
  return createHash('sha256')
    .update(
      JSON.stringify([
        target.host,
        target.port,
        target.security,
        target.username,
        target.password,
        target.trusted === true,
      ]),
    )
    .digest('hex');
}
