import { isIP } from 'node:net';
import { parseGivenMailbox } from '../domain/address.js';
import { errors } from '../domain/errors.js';
import { outboundRefusal, specialRange, type OutboundPolicy } from '../domain/outbound.js';
import { isSmtpSecurity } from '../mail/smtp-target.js';

/*
 * The checks of a relay as a person gives it (CLI, dashboard, management API) before
 * SmtpSettingsService stores it: its host in its stored form, its port and security, the outbound
 * rules, and the settings' own from address.
 */

/**
 * A relay's host as stored: trimmed, an IPv6 address without brackets, and an IPv4 address in its
 * usual form whatever way it was written (`127.1`, `2130706433`, `0x7f.0.0.1`, a trailing dot),
 * as the system's resolver would read it; a name as given.
 */
export function relayHost(raw: string): string {
  const host = raw.trim().replace(/^\[(.*)\]$/, '$1');
  // A bare `0x` is a number to URL parsers but a name to the system's resolver.
  if (!/^[0-9a-fx.]+$/i.test(host) || /(^|\.)0x(\.|$)/i.test(host)) return host;
  let parsed: string;
  try {
    parsed = new URL(`http://${host}`).hostname;
  } catch {
    return host;
  }
  return isIP(parsed) === 4 ? parsed : host;
}

/**
 * Checks a relay a project names (its host as `relayHost` gives it). Under enforced outbound rules
 * an address the rules refuse is refused here already, where the admin sees why; a name is judged
 * when mail goes out, on what it resolves to then.
 */
export function checkRelay(
  relay: { host: string; port: number; security: string },
  outbound: OutboundPolicy,
  what = 'SMTP',
): void {
  const { host, port, security } = relay;
  if (host === '' || host.length > 253 || /[\s/@]/.test(host))
    throw errors.invalidInput(
      // A URL pasted where its host goes (`smtp://user@mail.example.org:587`) is the usual mistake.
      /[/@]/.test(host)
        ? `${what} host is not valid: give the host name alone (mail.example.org), without smtp://, a user or a port`
        : `${what} host is not valid`,
    );
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw errors.invalidInput(`${what} port must be between 1 and 65535`);
  if (!isSmtpSecurity(security))
    throw errors.invalidInput(`${what} security must be auto, starttls, tls or none`);
  if (isIP(host) === 0 || outboundRefusal(outbound, { host, address: host, port }) === null) return;
  throw errors.invalidInput(
    `${what} host ${host} is not allowed: ${specialRange(host) ?? 'special-purpose'} addresses are ` +
      'refused in production unless HERALD_OUTBOUND_ALLOW lists them; use a public address or a host name',
  );
}

/** The settings' own from address, in its stored form; empty or absent is none. */
export function checkFromEmail(value: string | null | undefined): string | null {
  if (value === undefined || value === null || value === '') return null;
  const mailbox = parseGivenMailbox(value);
  if (mailbox === null || mailbox.name !== undefined)
    throw errors.invalidInput('From email must be an email address');
  return mailbox.address;
}
