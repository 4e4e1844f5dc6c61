import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * The VERP token carried in each message's envelope sender, `bounces+<token>@<bounce domain>`:
 * `<notification id in base 36>-<MAC>`, where the MAC is the first 16 characters (80 bits) of the
 * lowercase, unpadded RFC 4648 §6 base32 of HMAC-SHA256(key, "bounce:" + id in decimal).
 *
 * RFC 5321 §2.4 tells relays to preserve the case of local parts, but some do not, so the token
 * uses lowercase letters and digits only and is read case-insensitively.
 */

/** The bounce listener's mailbox; a watched IMAP mailbox has the local part of its own address. */
export const LISTENER_LOCAL_PART = 'bounces';
const MAC_CHARS = 16;
/** 16 base32 characters hold exactly 10 bytes, so no partial group needs padding or masking. */
const MAC_BYTES = (MAC_CHARS * 5) / 8;
/** Number.MAX_SAFE_INTEGER in base 36 ('2gosa7pa2gv') has 11 digits. */
const MAX_ID_DIGITS = 11;
const MAX_TOKEN_LENGTH = 64;
/** RFC 5321 §4.5.3.1.3: a path is at most 256 octets, angle brackets included; surrounding space counts too. */
const MAX_ADDRESS_LENGTH = 256;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
/**
 * Case-insensitive without the u flag, where no non-ASCII letter matches an ASCII range (ECMA-262
 * Canonicalize): toLowerCase would turn U+212A KELVIN SIGN into k, a second spelling of a token.
 */
const TOKEN_SHAPE = new RegExp(`^([0-9a-z]{1,${MAX_ID_DIGITS}})-([a-z2-7]{${MAC_CHARS}})$`, 'i');

export type BounceAddress =
  { kind: 'token'; id: number } | { kind: 'plain' } | { kind: 'forged' } | { kind: 'foreign' };

/** The MAC key, derived from the instance secret (HERALD_SECRET_KEY) with HKDF-SHA256, salt 'herald', info 'herald:bounce-token', 32 bytes. */
export function bounceKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'herald', 'herald:bounce-token', 32));
}

export function bounceToken(key: Buffer, notificationId: number): string {
  if (!isNotificationId(notificationId)) {
    throw new RangeError(`bounceToken: ${notificationId} is not a positive safe integer`);
  }
  return `${notificationId.toString(36)}-${mac(key, notificationId)}`;
}

/** The notification id the token names, or null when it is malformed or its MAC does not match. Never throws, for any string. */
export function readBounceToken(key: Buffer, token: string): number | null {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return null;
  const match = TOKEN_SHAPE.exec(token);
  if (!match) return null;
  const digits = match[1]!.toLowerCase();
  const id = Number.parseInt(digits, 36);
  // One spelling per id: a leading zero would otherwise give a second token for the same message.
  if (!isNotificationId(id) || id.toString(36) !== digits) return null;
  const sent = Buffer.from(match[2]!.toLowerCase(), 'ascii');
  const expected = Buffer.from(mac(key, id), 'ascii');
  return timingSafeEqual(sent, expected) ? id : null;
}

/** `bounces+<token>@<domain>`, or `<local>+<token>@<domain>` for a mailbox of another name. */
export function returnPath(
  key: Buffer,
  notificationId: number,
  domain: string,
  local = LISTENER_LOCAL_PART,
): string {
  return `${local}+${bounceToken(key, notificationId)}@${domain}`;
}

/**
 * What an inbound RCPT TO address is, for the listener (or a delivery address of a watched
 * mailbox, whose local part is `local`). Only the bounce domain's `bounces` mailbox is ever
 * 'token' or 'plain'; everything else is 'foreign' and must be refused, so the listener never
 * relays. Never throws.
 */
export function classifyBounceAddress(
  key: Buffer,
  address: string,
  domain: string,
  localPart = LISTENER_LOCAL_PART,
): BounceAddress {
  if (typeof address !== 'string' || typeof domain !== 'string') return { kind: 'foreign' };
  if (address.length > MAX_ADDRESS_LENGTH) return { kind: 'foreign' };
  const path = unwrapPath(address);
  const at = path.lastIndexOf('@');
  if (at <= 0) return { kind: 'foreign' };
  const ownDomain = domain.trim().toLowerCase();
  if (ownDomain === '' || path.slice(at + 1).toLowerCase() !== ownDomain) return { kind: 'foreign' };
  const local = path.slice(0, at).toLowerCase();
  const own = localPart.toLowerCase();
  if (local === own) return { kind: 'plain' };
  if (!local.startsWith(`${own}+`)) return { kind: 'foreign' };
  const id = readBounceToken(key, local.slice(own.length + 1));
  return id === null ? { kind: 'forged' } : { kind: 'token', id };
}

function unwrapPath(address: string): string {
  const trimmed = address.trim();
  const unbracketed =
    trimmed.startsWith('<') && trimmed.endsWith('>') && trimmed.length >= 2 ? trimmed.slice(1, -1) : trimmed;
  return unbracketed.trim();
}

function isNotificationId(value: number): boolean {
  return Number.isSafeInteger(value) && value > 0;
}

function mac(key: Buffer, notificationId: number): string {
  const digest = createHmac('sha256', key).update(`bounce:${notificationId}`).digest();
  return base32(digest.subarray(0, MAC_BYTES));
}

/** RFC 4648 §6 without padding; callers pass a multiple of 5 bytes. */
function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += BASE32[(value >>> bits) & 31];
    }
    value &= (1 << bits) - 1;
  }
  return out;
}
