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
    ['2001:db8::1', false],
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

describe('HERALD_OUTBOUND_ALLOW', () => {
  const policy = (raw: string): OutboundPolicy => ({ enforce: true, allow: parseOutboundAllow(raw) });
  const target = (host: string, address: string, port = 25) => ({ host, address, port });

  it('lets everything through outside production', () => {
    expect(outboundRefusal(OPEN_OUTBOUND, target('localhost', '127.0.0.1'))).toBeNull();
  });

  it('refuses internal addresses in production and lets public ones through', () => {
    expect(outboundRefusal(policy(''), target('localhost', '127.0.0.1'))).toMatch(/not allowed/);
    expect(outboundRefusal(policy(''), target('relay.example', '10.0.0.5'))).toMatch(/not allowed/);
    expect(outboundRefusal(policy(''), target('relay.example', '203.0.113.7'))).toBeNull();
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
