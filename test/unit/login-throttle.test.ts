import { describe, expect, it } from 'vitest';
import { clientNetwork } from '../../src/domain/client-network.js';
import { LOGIN_WINDOW_MS, loginAccount, loginKeys, loginRefusal } from '../../src/domain/login-throttle.js';

describe('login throttle keys', () => {
  it.each([
    ['victim@herald.test', 'victim@herald.test'],
    ['VICTIM@herald.test ', 'victim@herald.test'],
    ['  Victim@Herald.Test', 'victim@herald.test'],
    ['not an address', 'not an address'],
    ['x'.repeat(1000), 'x'.repeat(320)],
  ])('the account of %j is %j', (email, account) => {
    expect(loginAccount(email)).toBe(account);
  });

  it.each([
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('the client of %s is %s', (ip, client) => {
    expect(clientNetwork(ip)).toBe(client);
  });

  it('keys an account from a client apart from the client and the account', () => {
    expect(loginKeys('A@x.example ', '2001:db8:1:2::9')).toEqual({
      accountFromClient: 'account-client\na@x.example\n2001:db8:1:2::/64',
      client: 'client\n2001:db8:1:2::/64',
      account: 'account\na@x.example',
    });
  });
});

describe('loginRefusal', () => {
  const now = 10 * LOGIN_WINDOW_MS;
  it.each([
    ['no failures', [], null],
    [
      '9 for the account from this client',
      [{ kind: 'accountFromClient', failures: 9, windowStartedAt: now }],
      null,
    ],
    [
      '10 for the account from this client',
      [{ kind: 'accountFromClient', failures: 10, windowStartedAt: now }],
      900,
    ],
    ['29 from this client', [{ kind: 'client', failures: 29, windowStartedAt: now - 1000 }], null],
    ['30 from this client', [{ kind: 'client', failures: 30, windowStartedAt: now - 60_000 }], 840],
    ['99 at the account', [{ kind: 'account', failures: 99, windowStartedAt: now }], null],
    ['100 at the account', [{ kind: 'account', failures: 100, windowStartedAt: now }], 900],
  ] as const)('%s → %s s', (_what, counted, seconds) => {
    expect(loginRefusal(counted, now)).toBe(seconds);
  });
});
