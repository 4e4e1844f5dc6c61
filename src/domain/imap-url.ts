/**
 * HERALD_BOUNCE_IMAP_URL (product.md §9): `imaps://user:password@host[:993]/MAILBOX` (TLS from
 * the first byte), `imap://user:password@host[:143]/MAILBOX` (STARTTLS required), or
 * `imap://…?tls=none` (in the clear, only when chosen explicitly). The mailbox defaults to INBOX.
 */
export interface ImapSettings {
  readonly host: string;
  readonly port: number;
  readonly tls: 'implicit' | 'starttls' | 'none';
  readonly user: string;
  readonly password: string;
  /** The watched mailbox, decoded ('INBOX' when the URL names none). */
  readonly mailbox: string;
}

/** A mailbox or folder name: printable, bounded; `/` separates levels whatever the server uses. */
export function isFolderName(name: string): boolean {
  const printable = [...name].every((char) => char.charCodeAt(0) >= 0x20 && char.charCodeAt(0) !== 0x7f);
  return (
    printable &&
    name.length >= 1 &&
    name.length <= 200 &&
    !name.startsWith('/') &&
    !name.endsWith('/') &&
    !name.includes('//')
  );
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new Error(`its ${what} is not valid percent-encoding`);
  }
}

/** Throws an Error whose message says what is wrong (never quoting the password). */
export function parseImapUrl(raw: string): ImapSettings {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error('must be imaps://user:password@host:993/INBOX or imap://…');
  }
  const secure = url.protocol === 'imaps:';
  if (!secure && url.protocol !== 'imap:')
    throw new Error('must start with imaps:// (TLS) or imap:// (STARTTLS, or ?tls=none)');
  const user = decode(url.username, 'user name');
  const password = decode(url.password, 'password');
  if (user === '' || password === '')
    throw new Error('needs a user name and a password: imaps://user:password@host');
  if (url.hostname === '') throw new Error('needs a host');
  const params = [...url.searchParams.entries()];
  const clear = params.length === 1 && params[0]![0] === 'tls' && params[0]![1] === 'none';
  if (params.length > 0 && !clear) throw new Error('takes no parameter but ?tls=none');
  if (clear && secure) throw new Error('?tls=none goes with imap://, not imaps://');
  if (url.hash !== '') throw new Error('has a #fragment; a # in the password is written %23');
  const path = decode(url.pathname.replace(/^\//, ''), 'mailbox');
  const mailbox = path === '' ? 'INBOX' : path;
  if (!isFolderName(mailbox)) throw new Error('names a mailbox that is not a valid folder name');
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (secure ? 993 : 143) : Number(url.port),
    tls: secure ? 'implicit' : clear ? 'none' : 'starttls',
    user,
    password,
    mailbox,
  };
}

/** The URL without its password, for logs and start-up lines. */
export function describeImap(settings: ImapSettings): string {
  const scheme = settings.tls === 'implicit' ? 'imaps' : 'imap';
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  const tail = settings.tls === 'none' ? '?tls=none' : '';
  return `${scheme}://${encodeURIComponent(settings.user)}@${host}:${settings.port}/${settings.mailbox}${tail}`;
}
