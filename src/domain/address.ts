import { domainToASCII, domainToUnicode } from 'node:url';
import { HEADER_BREAK } from './header-break.js';
import { unstorableText } from './storable-text.js';

export interface Mailbox {
  readonly name?: string;
  readonly address: string;
}

/** RFC 5321 path limit (256) minus the angle brackets. */
export const MAX_ADDRESS_LENGTH = 254;

// 254 for the address, 200 for the name, quotes, escapes and spacing: anything longer is not one mailbox.
export const MAX_INPUT_LENGTH = 320;
const MAX_NAME_LENGTH = 200;
const MAX_LOCAL_LENGTH = 64;
const MAX_DOMAIN_LENGTH = 253;

// RFC 5322 dot-atom of atext: no quoted local parts, so the address needs no quoting anywhere.
const DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const ALL_DIGITS = /^[0-9]+$/;
// RFC 5322 specials other than '.', which unquoted names commonly carry ("Dr. Jane Doe").
// Rejecting them outside quotes rules out groups (':' ';'), lists (','), comments ('(' ')'),
// a second address ('<' '>' '@') and half-quoted names.
const UNQUOTED_NAME_FORBIDDEN = /[()<>[\]:;@\\,"]/;

/**
 * A mailbox as a caller or an operator gives it (a send's `to` and `reply_to`, a from address, an
 * admin): parseMailbox's, without direction overrides. Addresses already stored are read with
 * parseMailbox, so mail accepted before this rule still goes.
 */
export function parseGivenMailbox(input: string): Mailbox | null {
  return typeof input === 'string' && BIDI_CONTROL.test(input) ? null : parseMailbox(input);
}

/**
 * Parses exactly one mailbox: `jane@example.org` or `Jane Doe <jane@example.org>` or
 * `"Doe, Jane" <jane@example.org>`. Returns null when invalid.
 */
export function parseMailbox(input: string): Mailbox | null {
  if (
    typeof input !== 'string' ||
    input.length > MAX_INPUT_LENGTH ||
    HEADER_BREAK.test(input) ||
    unstorableText(input) !== null
  )
    return null;
  const trimmed = input.trim();
  if (!trimmed.endsWith('>')) {
    const address = parseAddress(trimmed);
    return address === null ? null : { address };
  }

  const open = findAngleOpen(trimmed);
  if (open < 0) return null;
  const address = parseAddress(trimmed.slice(open + 1, -1));
  if (address === null) return null;
  const name = parseName(trimmed.slice(0, open).trim());
  if (name === null) return null;
  return name === '' ? { address } : { name, address };
}

/**
 * Why `input` is not one mailbox, for the cases that can be named for certain (a hint beside the
 * fixed error); undefined for the rest. Only called for an input parseMailbox refused. `one` says
 * why the field takes a single address.
 */
export function mailboxProblem(
  input: unknown,
  one = 'a send has one recipient (a batch sends to several)',
): string | undefined {
  if (typeof input !== 'string') return 'Give one address as a string, e.g. "jane@example.org"';
  if (HEADER_BREAK.test(input)) return 'An address may not contain a line break or a control character';
  if (BIDI_CONTROL.test(input))
    return 'An address may not contain a direction override (U+202A–U+202E, U+2066–U+2069), which can show its name as another';
  const unstorable = unstorableText(input);
  if (unstorable !== null) return `The address ${unstorable}`;
  const address = /<([^<>]*)>\s*$/.exec(input)?.[1] ?? input.trim();
  if ((address.match(/@/g) ?? []).length > 1 || /[,;]/.test(address)) return `Give one address: ${one}`;
  const at = address.indexOf('@');
  if (at < 0) return 'An address needs an @, e.g. jane@example.org';
  if (NOT_ASCII.test(address.slice(0, at))) return 'The part before the @ must be ASCII';
  if (!LABEL_SEPARATORS.test(address.slice(at + 1)))
    return 'The domain needs a dot: a name such as example.org, not localhost or an IP address';
  return undefined;
}

/**
 * Index of the `<` that opens the address, skipping a leading quoted name (where `<` is just text).
 * -1 when there is none or when the remainder holds another `<` or `>`.
 */
function findAngleOpen(value: string): number {
  let start = 0;
  if (value.startsWith('"')) {
    const close = closingQuote(value);
    if (close < 0) return -1;
    start = close + 1;
  }
  const open = value.indexOf('<', start);
  if (open < 0) return -1;
  const inner = value.slice(open + 1, -1);
  if (inner.includes('<') || inner.includes('>')) return -1;
  return open;
}

/** Index of the unescaped `"` closing the quoted string that starts at 0, or -1. */
function closingQuote(value: string): number {
  for (let i = 1; i < value.length; i++) {
    const char = value[i];
    if (char === '\\') i++;
    else if (char === '"') return i;
  }
  return -1;
}

/** The display name without quotes or escapes, '' for none, null when invalid. */
function parseName(raw: string): string | null {
  let name: string;
  if (raw.startsWith('"')) {
    // The whole name must be the one quoted string: nothing may follow the closing quote.
    if (closingQuote(raw) !== raw.length - 1) return null;
    name = raw.slice(1, -1).replace(/\\(.)/g, '$1').trim();
  } else {
    if (UNQUOTED_NAME_FORBIDDEN.test(raw)) return null;
    name = raw;
  }
  return name.length > MAX_NAME_LENGTH ? null : name;
}

/**
 * Characters that turn the text after them around (RLO, LRE, the isolates): `Jane\u202E…` shows as
 * a name its writer did not type, the "Trojan source" trick. A right-to-left name needs none of
 * them: mail clients lay out Arabic and Hebrew names by the Unicode algorithm on their own.
 */
export const BIDI_CONTROL = /[\u202a-\u202e\u2066-\u2069]/;

// eslint-disable-next-line no-control-regex -- the whole ASCII range, control characters included
const NOT_ASCII = /[^\u0000-\u007f]/;
const BAD_HYPHENS = /^-|-$|^..--/;

/**
 * The domain as mail carries it without SMTPUTF8: lower case, and an internationalised name
 * (`bücher.example`) in its ASCII form (`xn--bcher-kva.example`, UTS #46, as browsers do), so an
 * address compares equal however it was written; '' when it has no such form.
 */
function asciiDomain(domain: string): string {
  if (!NOT_ASCII.test(domain)) return domain.toLowerCase();
  const ascii = domainToASCII(domain);
  // Checked once mapped (which drops soft hyphens and turns full-width stops and hyphens into
  // ASCII ones): an internationalised label may not begin or end with a hyphen, nor have two in
  // its third and fourth places (RFC 5891 §4.2.3.1).
  const unicode = domainToUnicode(ascii).split('.');
  const badLabel = ascii
    .split('.')
    .some((label, i) => label.startsWith('xn--') && BAD_HYPHENS.test(unicode[i] ?? ''));
  return badLabel ? '' : ascii;
}

/**
 * The address with its domain lower-cased (an internationalised one in its ASCII form), or null
 * when it is not a plain dot-atom@domain. The local part must be ASCII: a non-ASCII one needs
 * SMTPUTF8 at every hop, which Herald does not ask relays for.
 */
function parseAddress(value: string): string | null {
  if (value.length > MAX_ADDRESS_LENGTH) return null;
  const at = value.indexOf('@');
  if (at < 0 || at !== value.lastIndexOf('@')) return null;
  const local = value.slice(0, at);
  const domain = asciiDomain(value.slice(at + 1));
  if (local.length > MAX_LOCAL_LENGTH || !DOT_ATOM.test(local)) return null;
  if (domain.length > MAX_DOMAIN_LENGTH || local.length + 1 + domain.length > MAX_ADDRESS_LENGTH) return null;
  const labels = domain.split('.');
  if (labels.length < 2 || !labels.every((label) => LABEL.test(label))) return null;
  // A numeric TLD would make 192.168.0.1 look like a domain; IP literals are not accepted.
  if (ALL_DIGITS.test(labels[labels.length - 1] ?? '')) return null;
  return `${local}@${domain}`;
}

/** The full stops UTS #46 maps to `.` (ideographic, full-width, half-width ideographic). */
const LABEL_SEPARATORS = /[.\u3002\uff0e\uff61]/;

/**
 * Text to look for in stored addresses, which keep an internationalised domain in its ASCII form:
 * each whole label of the domain part (after the last `@`, or all of it without one) that is not
 * ASCII becomes its ASCII form, so `bücher` finds `xn--bcher-kva`. Part of such a label (`büch`)
 * finds nothing: its ASCII form is not a part of the whole label's.
 */
export function addressSearchText(text: string): string {
  if (!NOT_ASCII.test(text)) return text;
  const at = text.lastIndexOf('@');
  const labels = text.slice(at + 1).split(LABEL_SEPARATORS);
  const ascii = labels.map((label) => (NOT_ASCII.test(label) ? domainToASCII(label) || label : label));
  return `${text.slice(0, at + 1)}${ascii.join('.')}`;
}
