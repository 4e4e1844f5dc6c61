import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import {
  isInternalAddress,
  OPEN_OUTBOUND,
  outboundRefusal,
  parseOutboundAllow,
  type OutboundPolicy,
} from '../../src/domain/outbound.js';

describe('internal addresses', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.255.0.9', true],
    ['0.0.0.0', true],
    ['10.1.2.3', true],
    ['172.16.0.1', true],
    ['172.31.255.255', true],
    ['172.32.0.1', false],
    ['192.168.1.1', true],
    ['169.254.169.254', true],
    ['100.64.0.1', true],
    ['8.8.8.8', false],
    ['93.184.216.34', false],
    ['::1', true],
    ['::', true],
    ['fe80::1', true],
    ['fd12:3456::1', true],
    ['fc00::1', true],
    ['2001:db8::1', true],
    ['2a00:1450:4001:80b::200e', false],
    ['2606:4700::1111', false],
    ['::ffff:127.0.0.1', true],
    ['::ffff:7f00:1', true],
    ['::ffff:10.0.0.1', true],
    ['::ffff:8.8.8.8', false],
    ['not-an-address', true],
    // IPv6 forms that carry an IPv4 address are judged as that address.
    ['::127.0.0.1', true],
    ['::ffff:0:127.0.0.1', true],
    ['64:ff9b::a9fe:a9fe', true],
    ['64:ff9b::127.0.0.1', true],
    ['64:ff9b::808:808', false],
    ['2002:7f00:1::', true],
    ['2002:c0a8:101::1', true],
    ['2002:808:808::1', false],
    ['fec0::1', true],
    ['::2', true],
  ])('%s → %s', (address, expected) => {
    expect(isInternalAddress(address)).toBe(expected);
  });
});

/**
 * IANA's IPv4 and IPv6 Special-Purpose Address Registries (iana-ipv4-special-registry,
 * iana-ipv6-special-registry), with the multicast blocks, as published in 2025: the first and the
 * last address of every block must be refused, whatever ipaddr.js calls it. Only the blocks that
 * embed an IPv4 address (IPv4-mapped, NAT64's well-known prefix, 6to4) are judged by that address.
 */
const IANA_V4: readonly [string, string, string][] = [
  ['0.0.0.0/8', '0.0.0.0', '0.255.255.255'],
  ['10.0.0.0/8', '10.0.0.0', '10.255.255.255'],
  ['100.64.0.0/10', '100.64.0.0', '100.127.255.255'],
  ['127.0.0.0/8', '127.0.0.0', '127.255.255.255'],
  ['169.254.0.0/16', '169.254.0.0', '169.254.255.255'],
  ['172.16.0.0/12', '172.16.0.0', '172.31.255.255'],
  ['192.0.0.0/24', '192.0.0.0', '192.0.0.255'],
  ['192.0.2.0/24', '192.0.2.0', '192.0.2.255'],
  ['192.31.196.0/24', '192.31.196.0', '192.31.196.255'],
  ['192.52.193.0/24', '192.52.193.0', '192.52.193.255'],
  ['192.88.99.0/24', '192.88.99.0', '192.88.99.255'],
  ['192.168.0.0/16', '192.168.0.0', '192.168.255.255'],
  ['192.175.48.0/24', '192.175.48.0', '192.175.48.255'],
  ['198.18.0.0/15', '198.18.0.0', '198.19.255.255'],
  ['198.51.100.0/24', '198.51.100.0', '198.51.100.255'],
  ['203.0.113.0/24', '203.0.113.0', '203.0.113.255'],
  ['224.0.0.0/4 (multicast)', '224.0.0.0', '239.255.255.255'],
  ['240.0.0.0/4', '240.0.0.0', '255.255.255.254'],
  ['255.255.255.255/32', '255.255.255.255', '255.255.255.255'],
];
const IANA_V6: readonly [string, string, string][] = [
  ['::1/128', '::1', '::1'],
  ['::/128', '::', '::'],
  ['64:ff9b:1::/48', '64:ff9b:1::', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff'],
  ['100::/64', '100::', '100::ffff:ffff:ffff:ffff'],
  ['100:0:0:1::/64', '100:0:0:1::', '100::1:ffff:ffff:ffff:ffff'],
  ['2001::/23', '2001::', '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001::/32 (Teredo)', '2001::1', '2001:0:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001:1::1/128', '2001:1::1', '2001:1::1'],
  ['2001:2::/48', '2001:2::', '2001:2:0:ffff:ffff:ffff:ffff:ffff'],
  ['2001:3::/32', '2001:3::', '2001:3:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001:4:112::/48', '2001:4:112::', '2001:4:112:ffff:ffff:ffff:ffff:ffff'],
  ['2001:10::/28', '2001:10::', '2001:1f:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001:20::/28', '2001:20::', '2001:2f:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001:30::/28', '2001:30::', '2001:3f:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2001:db8::/32', '2001:db8::', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['2620:4f:8000::/48', '2620:4f:8000::', '2620:4f:8000:ffff:ffff:ffff:ffff:ffff'],
  ['3fff::/20', '3fff::', '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['5f00::/16', '5f00::', '5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['fc00::/7', 'fc00::', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['fe80::/10', 'fe80::', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ['ff00::/8 (multicast)', 'ff00::', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
];

describe("IANA's special-purpose address registries", () => {
  it.each([...IANA_V4, ...IANA_V6])('%s is refused, first and last address', (_block, first, last) => {
    expect(isInternalAddress(first)).toBe(true);
    expect(isInternalAddress(last)).toBe(true);
  });

  it.each([
    // Embedded forms of a special-purpose IPv4 address.
    ['::ffff:192.0.2.1', true],
    ['64:ff9b::c612:1', true],
    ['2002:c000:201::1', true],
    // Just outside a block, and ordinary public hosts.
    ['198.17.255.255', false],
    ['198.20.0.0', false],
    ['223.255.255.255', false],
    ['192.0.3.1', false],
    ['1.1.1.1', false],
    ['2001:200::1', false],
    ['2001:4860:4860::8888', false],
    ['2620:4f:8001::1', false],
    ['3fff:1000::1', false],
    ['4000::1', true],
  ])('%s → refused: %s', (address, refused) => {
    expect(isInternalAddress(address)).toBe(refused);
  });
});

describe('HERALD_OUTBOUND_ALLOW', () => {
  const policy = (raw: string): OutboundPolicy => ({ enforce: true, allow: parseOutboundAllow(raw) });
  const target = (host: string, address: string, port = 25) => ({ host, address, port });

  it('lets everything through outside production', () => {
    expect(outboundRefusal(OPEN_OUTBOUND, target('localhost', '127.0.0.1'))).toBeNull();
  });

  it('refuses internal addresses in production and lets public ones through', () => {
    expect(outboundRefusal(policy(''), target('localhost', '127.0.0.1'))).toMatch(/not allowed/);
    expect(outboundRefusal(policy(''), target('relay.example', '10.0.0.5'))).toMatch(/not allowed/);
    expect(outboundRefusal(policy(''), target('relay.example', '93.184.216.34'))).toBeNull();
    // The refusal names the kind of address, never more.
    expect(outboundRefusal(policy(''), target('relay.example', '198.18.0.1'))).toMatch(
      /^Host is not allowed: .*\(reserved; see HERALD_OUTBOUND_ALLOW\)$/,
    );
  });

  it.each([
    ['127.0.0.1', target('localhost', '127.0.0.1', 2525), true],
    ['127.0.0.1:2525', target('localhost', '127.0.0.1', 2525), true],
    ['127.0.0.1:25', target('localhost', '127.0.0.1', 2525), false],
    ['10.0.0.0/8', target('relay', '10.9.8.7'), true],
    ['10.0.0.0/8:587', target('relay', '10.9.8.7', 587), true],
    ['10.0.0.0/8:587', target('relay', '10.9.8.7', 25), false],
    ['10.0.0.0/16', target('relay', '10.9.8.7'), false],
    ['mail.internal', target('mail.internal', '10.9.8.7'), true],
    ['MAIL.internal:25', target('mail.internal', '10.9.8.7', 25), true],
    ['mail.internal', target('other.internal', '10.9.8.7'), false],
    ['[fd00::25]:2525', target('relay', 'fd00::25', 2525), true],
    ['fd00::/8', target('relay', 'fd12::1'), true],
    ['::1', target('relay', '::1'), true],
    [' 192.168.0.0/16 , mail.internal ', target('relay', '192.168.3.4'), true],
  ])('%j judges %j: allowed=%s', (raw, to, allowed) => {
    expect(outboundRefusal(policy(raw), to) === null).toBe(allowed);
  });

  it.each([
    '10.0.0.0/33',
    'relay:0',
    'relay:70000',
    'bad host',
    'a/b',
    '10.0.0.0/x',
    '10.0.0.0/8/9',
    '999.1.1.1',
    '10.0.0.256:25',
  ])('refuses the entry %j with a message naming it', (raw) => {
    expect(() => parseOutboundAllow(raw)).toThrow(/HERALD_OUTBOUND_ALLOW/);
  });
});

describe('outbound rules in the configuration', () => {
  const production = { NODE_ENV: 'production', HERALD_SECRET_KEY: 'k'.repeat(64) };

  it('are enforced in production only, with the allow list parsed once', () => {
    expect(loadConfig({}).outbound.enforce).toBe(false);
    const config = loadConfig({ ...production, HERALD_OUTBOUND_ALLOW: '10.0.0.0/8:25,mail.internal' });
    expect(config.outbound.enforce).toBe(true);
    expect(outboundRefusal(config.outbound, { host: 'x', address: '10.1.1.1', port: 25 })).toBeNull();
    expect(outboundRefusal(config.outbound, { host: 'x', address: '10.1.1.1', port: 587 })).not.toBeNull();
  });

  it('refuse an allow list that cannot be read, naming the variable', () => {
    expect(() => loadConfig({ ...production, HERALD_OUTBOUND_ALLOW: '10.0.0.0/99' })).toThrow(ConfigError);
    expect(() => loadConfig({ HERALD_OUTBOUND_ALLOW: 'not a host' })).toThrow(/HERALD_OUTBOUND_ALLOW/);
  });
});
