import { isIP } from 'node:net';
import { ipv4Of, ipv6Groups } from './ipv6.js';

/**
 * The client a connection or a request comes from, as limits count clients: its IPv4 address
 * (also when written IPv4-mapped), or the /64 network of its IPv6 address, since one host is
 * usually given a whole /64 and counting its single addresses would count nothing.
 */
export function clientNetwork(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const g = ipv6Groups(ip.replace(/%.*$/, ''));
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return ipv4Of(g[6]!, g[7]!);
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}
