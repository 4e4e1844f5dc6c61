import { BlockList, isIP } from 'node:net';

/**
 * Which addresses Herald may connect to on a project's behalf (product.md §8). A project's SMTP
 * host is chosen by a dashboard admin, not the operator, so in production it must not reach the
 * operator's own network: loopback, private, link-local and unique-local addresses (and the
 * unspecified address, which reaches the local host) are refused unless HERALD_OUTBOUND_ALLOW lists
 * them. The check runs on the resolved address at connect time, so a name that resolves (or is
 * re-pointed) to an internal address is caught too. Node's BlockList is a pure matcher: no I/O.
 */

const INTERNAL_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], // "this network": 0.0.0.0 connects to the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT, private in practice
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, including cloud metadata services
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
];
const INTERNAL_V6: readonly [string, number][] = [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed on some networks)
];

const internal = new BlockList();
for (const [network, prefix] of INTERNAL_V4) internal.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of INTERNAL_V6) internal.addSubnet(network, prefix, 'ipv6');

/** One HERALD_OUTBOUND_ALLOW entry: a host name, an address or a CIDR block, and maybe a port. */
export type AllowEntry =
  | { readonly kind: 'name'; readonly host: string; readonly port: number | null }
  | { readonly kind: 'net'; readonly list: BlockList; readonly port: number | null };

export interface OutboundPolicy {
  /** False outside production: every address may be reached. */
  readonly enforce: boolean;
  readonly allow: readonly AllowEntry[];
}

export const OPEN_OUTBOUND: OutboundPolicy = Object.freeze({ enforce: false, allow: [] });

/** The eight 16-bit groups of an IPv6 address (a trailing dotted quad counts as two). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
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

const v4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;

/**
 * The IPv4 address an IPv6 address stands for, where it embeds one that the network may route to:
 * IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), IPv4-translated
 * (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`). Such an address is
 * judged as that IPv4 address: `64:ff9b::a9fe:a9fe` reaches 169.254.169.254 through a NAT64 gateway.
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (zeros(0, 6) && (g[6]! !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return null;
}

/** An address as the rules judge it: IPv6 forms that embed an IPv4 address are that address. */
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } | null {
  const version = isIP(address);
  if (version === 0) return null;
  if (version === 4) return { address, family: 'ipv4' };
  const inner = embeddedIpv4(address);
  return inner === null ? { address, family: 'ipv6' } : { address: inner, family: 'ipv4' };
}

/** True for loopback, private, link-local, unique-local and unspecified addresses. */
export function isInternalAddress(address: string): boolean {
  const ip = unmapped(address);
  // Anything that is not a plain address is treated as internal: refuse what cannot be judged.
  return ip === null || internal.check(ip.address, ip.family);
}

function portSuffix(raw: string): { rest: string; port: number | null } | null {
  const match = /^(.*):(\d{1,5})$/.exec(raw);
  if (match === null || (raw.startsWith('[') === false && (match[1] ?? '').includes(':'))) {
    return { rest: raw, port: null };
  }
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return null;
  return { rest: match[1]!, port };
}

/**
 * Parses HERALD_OUTBOUND_ALLOW: comma-separated host names, addresses or CIDR blocks, each with an
 * optional `:port` (IPv6 in brackets when a port follows: `[fd00::25]:2525`). Throws a message
 * naming the entry that cannot be read.
 */
export function parseOutboundAllow(raw: string): AllowEntry[] {
  const entries: AllowEntry[] = [];
  for (const item of raw.split(',').map((part) => part.trim())) {
    if (item === '') continue;
    const split = portSuffix(item);
    if (split === null) throw new Error(`HERALD_OUTBOUND_ALLOW: bad port in ${JSON.stringify(item)}`);
    const rest = split.rest.replace(/^\[(.*)\]$/, '$1');
    const [network, prefixText, extra] = rest.split('/');
    // `999.1.1.1` is neither an address nor a name anyone means: refuse it rather than match nothing.
    if (extra !== undefined || (isIP(network ?? '') === 0 && /^[\d.]+$/.test(network ?? '')))
      throw new Error(`HERALD_OUTBOUND_ALLOW: ${JSON.stringify(item)} is not a host, address or CIDR block`);
    const ip = unmapped(network ?? '');
    if (ip !== null) {
      const max = ip.family === 'ipv4' ? 32 : 128;
      const prefix = prefixText === undefined ? max : Number(prefixText);
      if (!/^\d+$/.test(prefixText ?? String(max)) || prefix > max)
        throw new Error(`HERALD_OUTBOUND_ALLOW: bad prefix length in ${JSON.stringify(item)}`);
      const list = new BlockList();
      list.addSubnet(ip.address, prefix, ip.family);
      entries.push({ kind: 'net', list, port: split.port });
    } else if (
      prefixText === undefined &&
      /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(rest)
    ) {
      entries.push({ kind: 'name', host: rest.toLowerCase(), port: split.port });
    } else {
      throw new Error(`HERALD_OUTBOUND_ALLOW: ${JSON.stringify(item)} is not a host, address or CIDR block`);
    }
  }
  return entries;
}

export interface OutboundTarget {
  /** The host as configured (a name or an address). */
  readonly host: string;
  /** The address it resolved to, about to be connected to. */
  readonly address: string;
  readonly port: number;
}

/** Null when Herald may connect; otherwise why not, in words safe to show the admin. */
export function outboundRefusal(policy: OutboundPolicy, target: OutboundTarget): string | null {
  if (!policy.enforce || !isInternalAddress(target.address)) return null;
  const host = target.host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  const ip = unmapped(target.address);
  const allowed = policy.allow.some((entry) => {
    if (entry.port !== null && entry.port !== target.port) return false;
    if (entry.kind === 'name') return entry.host === host;
    return ip !== null && entry.list.check(ip.address, ip.family);
  });
  if (allowed) return null;
  return 'Host is not allowed: it resolves to a loopback, private or link-local address (see HERALD_OUTBOUND_ALLOW)';
}
