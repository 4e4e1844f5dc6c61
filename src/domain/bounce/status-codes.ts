import type { BounceCategory } from './categories.js';

// RFC 3463 §2: class.subject.detail, class 2, 4 or 5, subject and detail of 1–3 digits. Not part of
// a longer token such as an IP address (192.0.2.1), a version (1.2.3.4, v5.1.1) or `5.1.1a`; a
// hyphen may precede it: `550-5.1.1` is a line of a multiline reply (RFC 5321 §4.2), and `#5.1.1`
// is qmail's.
const ENHANCED_STATUS = /(?<![\w.])([245]\.\d{1,3}\.\d{1,3})(?!\.?\w)/;
/** A folded header field's worth of text: a status code is near the start of a reply. */
const MAX_STATUS_SCAN = 4 * 998;

/** The enhanced status code in a reply such as `550 5.1.1 <x@y>: Recipient address rejected`. */
export function enhancedStatusIn(text: string): string | null {
  if (typeof text !== 'string') return null;
  return ENHANCED_STATUS.exec(text.slice(0, MAX_STATUS_SCAN))?.[1] ?? null;
}

/**
 * Enhanced status codes (RFC 3463 and the IANA registry of RFC 5248) → category. A code names a
 * category only where its meaning is specific; generic codes (X.0.0, X.1.0, X.5.0, X.7.0, X.7.1,
 * which servers use for anything from spam to an unknown user) name none, and the diagnostic
 * text decides. The class (4 or 5) does not change the category here: whether the failure is
 * permanent is decided apart (classify.ts).
 */
const BY_SUBJECT_DETAIL: Readonly<Record<string, BounceCategory>> = {
  // X.1 addressing
  '1.1': 'user_unknown', // Bad destination mailbox address
  '1.2': 'host_unknown', // Bad destination system address
  '1.3': 'user_unknown', // Bad destination mailbox address syntax
  '1.6': 'has_moved', // Destination mailbox has moved, no forwarding address
  '1.7': 'rejected', // Bad sender's mailbox address syntax
  '1.8': 'rejected', // Bad sender's system address
  '1.9': 'other', // Message relayed to non-compliant mailer
  '1.10': 'host_unknown', // Recipient address has null MX (RFC 7505)
  // X.2 mailbox
  '2.1': 'suspended', // Mailbox disabled, not accepting messages
  '2.2': 'mailbox_full', // Mailbox full
  '2.3': 'message_too_big', // Message length exceeds administrative limit
  '2.4': 'system_error', // Mailing list expansion problem
  // X.3 mail system
  '3.0': 'system_error',
  '3.1': 'system_error', // Mail system full
  '3.2': 'system_error', // System not accepting network messages (often a host being shut down)
  '3.3': 'system_error', // System not capable of selected features
  '3.4': 'message_too_big', // Message too big for system
  '3.5': 'system_error', // System incorrectly configured
  // X.4 network and routing
  '4.0': 'network_error',
  '4.1': 'network_error', // No answer from host
  '4.2': 'network_error', // Bad connection
  '4.3': 'system_error', // Directory server failure
  '4.4': 'host_unknown', // Unable to route (permanent only: see TRANSIENT_OVERRIDES)
  '4.5': 'system_error', // Mail system congestion
  '4.6': 'network_error', // Routing loop detected
  '4.7': 'expired', // Delivery time expired
  // X.5 protocol
  '5.1': 'policy', // Invalid command
  '5.2': 'policy', // Syntax error
  '5.3': 'rate_limited', // Too many recipients
  '5.4': 'policy', // Invalid command arguments
  '5.5': 'system_error', // Wrong protocol version
  '5.6': 'policy', // Authentication exchange line too long
  // X.6 content
  '6.0': 'policy',
  '6.1': 'policy', // Media not supported
  '6.2': 'policy', // Conversion required and prohibited
  '6.3': 'policy', // Conversion required but not supported
  '6.5': 'policy', // Conversion failed
  '6.6': 'policy', // Message content not available
  '6.7': 'policy', // Non-ASCII addresses not permitted
  '6.8': 'policy',
  '6.9': 'policy', // UTF-8 string reply is required
  '6.10': 'policy',
  // X.7 security and policy
  '7.2': 'rejected', // Mailing list expansion prohibited
  '7.3': 'policy', // Security conversion required but not possible
  '7.4': 'auth_failure', // Security features not supported
  '7.5': 'auth_failure', // Cryptographic failure
  '7.6': 'auth_failure', // Cryptographic algorithm not supported
  '7.7': 'auth_failure', // Message integrity failure
  '7.8': 'auth_failure', // Authentication credentials invalid
  '7.9': 'policy', // Authentication mechanism is too weak; Yahoo uses it for policy refusals
  '7.10': 'auth_failure', // Encryption needed
  '7.11': 'auth_failure', // Encryption required for requested authentication mechanism
  '7.12': 'auth_failure', // A password transition is needed
  '7.13': 'suspended', // User account disabled
  '7.14': 'auth_failure', // Trust relationship required
  '7.15': 'policy', // Priority level is too low
  '7.16': 'message_too_big', // Message is too big for the specified priority
  '7.17': 'has_moved', // Mailbox owner has changed (RFC 7293)
  '7.18': 'has_moved', // Domain owner has changed (RFC 7293)
  '7.19': 'other', // RRVS test cannot be completed
  '7.20': 'auth_failure', // No passing DKIM signature found (RFC 7372)
  '7.21': 'auth_failure', // No acceptable DKIM signature found
  '7.22': 'auth_failure', // No valid author-matched DKIM signature found
  '7.23': 'auth_failure', // SPF validation failed
  '7.24': 'auth_failure', // SPF validation error
  '7.25': 'blocked', // Reverse DNS validation failed
  '7.26': 'auth_failure', // Multiple authentication checks failed
  '7.27': 'rejected', // Sender address has null MX (RFC 7505): the sender's fault
  '7.28': 'rate_limited', // Mail flood detected
  '7.29': 'auth_failure', // ARC validation failure (RFC 8617)
  '7.30': 'policy', // REQUIRETLS support required (RFC 8689)
  // Exchange Online and Outlook.com, which document their own details
  '1.351': 'user_unknown', // the next hop refused the recipient ("unknown recipient")
  '2.121': 'rate_limited', // the recipient's hourly message limit
  '2.122': 'rate_limited',
  '4.310': 'host_unknown', // DNS domain does not exist
  '4.312': 'network_error', // DNS query failed
  '4.316': 'expired', // message expired, connection refused
  '7.509': 'auth_failure', // DMARC reject
  '7.510': 'auth_failure',
  '7.515': 'auth_failure', // sender authentication requirements for high-volume senders
  '7.650': 'blocked', // IP reputation
};

/** Transient forms whose category differs: a 4.4.4 is a routing failure for now, not a missing domain. */
const TRANSIENT_OVERRIDES: Readonly<Record<string, BounceCategory>> = {
  '4.4': 'network_error',
  '1.10': 'network_error',
};

const STATUS_SHAPE = /^([245])\.(\d{1,3})\.(\d{1,3})$/;

/**
 * The category an enhanced status code names on its own, or null where it is generic. Microsoft's
 * 5.7.6xx–5.7.7xx codes all refuse the sending IP or tenant.
 */
export function categoryOfStatus(status: string | null): BounceCategory | null {
  const match = status === null ? null : STATUS_SHAPE.exec(status);
  if (!match) return null;
  const [, statusClass, subject, detail] = match;
  const key = `${subject}.${detail}`;
  if (statusClass === '2') return null;
  if (statusClass === '4') {
    const transient = TRANSIENT_OVERRIDES[key];
    if (transient) return transient;
  }
  const named = BY_SUBJECT_DETAIL[key];
  if (named) return named;
  if (subject === '7' && Number(detail) >= 600 && Number(detail) < 800) return 'blocked';
  return null;
}

/**
 * The default of a status's subject when its detail names nothing specific (RFC 3463 §3: the
 * subject alone says which part of the system failed). X.1 and X.2 give no default: an unknown
 * detail there may be anything from a bad address to a content filter. X.7 (security or policy)
 * is a policy, unless a refusal of the connection says more (classify.ts `fallbackOf`).
 */
export function categoryOfSubject(status: string | null): BounceCategory | null {
  const match = status === null ? null : STATUS_SHAPE.exec(status);
  if (!match || match[1] === '2') return null;
  switch (match[2]) {
    case '3':
      return 'system_error';
    case '4':
      return 'network_error';
    case '5':
      return 'policy';
    case '6':
      return 'policy';
    case '7':
      return 'policy';
    default:
      return null;
  }
}
