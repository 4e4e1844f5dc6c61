import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { ipv4Of, ipv6Groups } from './ipv6.js';

/**
 * Which addresses Herald may connect to on a project's behalf (product.md §8). A project's SMTP
 * host and webhook URLs are chosen by a dashboard admin, not the operator, so in production they
 * must not reach the operator's own network or anything that is not a plain public host: only
 * global unicast addresses are allowed unless HERALD_OUTBOUND_ALLOW lists them. Everything in
 * IANA's IPv4 and IPv6 special-purpose address registries is refused (loopback, private,
 * link-local, unique-local, shared, documentation, benchmarking, reserved, broadcast, multicast,
 * Teredo, local-use NAT64, ...), as named by ipaddr.js's range table, and of IPv6 only the global
 * unicast space IANA allocates (2000::/3) is allowed at all. The check runs on the resolved address
 * at connect time, so a name that resolves (or is re-pointed) to such an address is caught too.
 * Nothing here does I/O.
 */

/** The one range name of ipaddr.js that is an ordinary, globally routed host. */
const PUBLIC_RANGE = 'unicast';
/** IANA's global unicast space: the rest of IPv6 is reserved, special-purpose or not routed. */
const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];
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

/**
 * The IPv4 address an IPv6 address stands for, where it embeds one that the network may route to:
 * IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), IPv4-translated
 * (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`). Such an address is
 * judged as that IPv4 address: `64:ff9b::a9fe:a9fe` reaches 169.254.169.254 through a NAT64 gateway.
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return ipv4Of(g[6]!, g[7]!);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return ipv4Of(g[6]!, g[7]!);
  if (zeros(0, 6) && (g[6]! !== 0 || g[7]! > 1)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x2002) return ipv4Of(g[1]!, g[2]!);
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

/**
 * The special-purpose range an address falls in (ipaddr.js's name for it: `loopback`, `private`,
 * `reserved`, `teredo`, ...), or null for a public unicast address. IPv6 forms that embed an IPv4
 * address are judged as that address; anything that is not an address is `invalid`.
 */
export function specialRange(address: string): string | null {
  const ip = unmapped(address);
  if (ip === null) return 'invalid';
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(ip.address);
  } catch {
    return 'invalid';
  }
  const range = parsed.range();
  if (range !== PUBLIC_RANGE) return range;
  if (parsed.kind() === 'ipv6' && !parsed.match(IPV6_GLOBAL_UNICAST)) return 'reserved';
  return null;
}

/** True for every address but a public unicast one: what needs HERALD_OUTBOUND_ALLOW. */
export function isInternalAddress(address: string): boolean {
  // Anything that is not a plain address is treated as internal: refuse what cannot be judged.
  return specialRange(address) !== null;
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
  return `Host is not allowed: it resolves to a loopback, private, link-local or other special-purpose address (${specialRange(target.address)}; see HERALD_OUTBOUND_ALLOW)`;
}
