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

/** `::ffff:10.0.0.1` is 10.0.0.1: an IPv4-mapped IPv6 address is judged as the IPv4 address. */
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } | null {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return { address: mapped[1]!, family: 'ipv4' };
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex) {
    const high = Number.parseInt(hex[1]!, 16);
    const low = Number.parseInt(hex[2]!, 16);
    return { address: `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, family: 'ipv4' };
  }
  const version = isIP(address);
  if (version === 0) return null;
  return { address, family: version === 4 ? 'ipv4' : 'ipv6' };
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
    const [network, prefixText] = rest.split('/');
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
