import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { describeImap, parseImapUrl } from '../../src/domain/imap-url.js';

/** HERALD_BOUNCE_IMAP_URL and its companions (product.md §9), read once at start-up. */

const env = (vars: Record<string, string>) => loadConfig({ HERALD_DATA_DIR: '/tmp/herald-unit', ...vars });

describe('parseImapUrl', () => {
  it.each([
    [
      'imaps://u%40x.org:p%23w@mail.x.org/INBOX',
      { host: 'mail.x.org', port: 993, tls: 'implicit', user: 'u@x.org', password: 'p#w', mailbox: 'INBOX' },
    ],
    ['imap://u:p@mail.x.org', { port: 143, tls: 'starttls', mailbox: 'INBOX' }],
    [
      'imap://u:p@127.0.0.1:1143/Bounces/Herald?tls=none',
      { port: 1143, tls: 'none', mailbox: 'Bounces/Herald' },
    ],
    ['imaps://u:p@[::1]:10993/INBOX', { host: '::1', port: 10993 }],
  ])('%s', (url, expected) => {
    expect(parseImapUrl(url)).toMatchObject(expected);
  });

  it.each([
    ['pop3://u:p@x.org', /imaps:\/\/ \(TLS\) or imap:\/\//],
    ['imaps://x.org/INBOX', /needs a user name and a password/],
    ['imaps://u@x.org/INBOX', /needs a user name and a password/],
    ['imaps://u:p@x.org/INBOX?tls=none', /goes with imap:\/\//],
    ['imap://u:p@x.org/INBOX?tls=off', /takes no parameter but \?tls=none/],
    ['imap://u:p@x.org/INBOX?tls=none&x=1', /takes no parameter/],
    ['imap://u:p#w@x.org/INBOX', /./],
    ['not a url', /must be imaps:/],
  ])('%s is refused', (url, message) => {
    expect(() => parseImapUrl(url)).toThrow(message);
  });

  it('is described without its password', () => {
    const settings = parseImapUrl('imap://bounces%40x.org:s3cret@127.0.0.1:1143/INBOX?tls=none');
    expect(describeImap(settings)).toBe('imap://bounces%40x.org@127.0.0.1:1143/INBOX?tls=none');
    expect(describeImap(settings)).not.toContain('s3cret');
  });
});

describe('the bounce mailbox settings', () => {
  it('take the address from the user name, and the default folders', () => {
    const { imap } = env({
      HERALD_BOUNCE_IMAP_URL: 'imaps://alerts%40shop.example:pw@imap.example/INBOX',
    }).bounces;
    expect(imap).toMatchObject({
      address: { local: 'alerts', domain: 'shop.example' },
      doneFolder: 'Herald/Processed',
      unrecognizedFolder: 'Herald/Unrecognized',
      pollMs: 60_000,
    });
  });

  it('take HERALD_BOUNCE_ADDRESS over the user name, and HERALD_BOUNCE_IMAP_DONE', () => {
    const { imap } = env({
      HERALD_BOUNCE_IMAP_URL: 'imaps://me:pw@imap.example/INBOX',
      HERALD_BOUNCE_ADDRESS: 'Returns@Shop.Example',
      HERALD_BOUNCE_IMAP_DONE: 'Done/Bounces',
    }).bounces;
    expect(imap).toMatchObject({
      address: { local: 'Returns', domain: 'shop.example' },
      doneFolder: 'Done/Bounces',
    });
  });

  it.each([
    [{ HERALD_BOUNCE_IMAP_URL: 'imaps://me:pw@imap.example/INBOX' }, /HERALD_BOUNCE_ADDRESS is needed/],
    [{ HERALD_BOUNCE_IMAP_URL: 'imaps://a%2Bb%40x.org:pw@imap.example' }, /must not contain '\+'/],
    [
      { HERALD_BOUNCE_IMAP_URL: 'imaps://a@x.org:pw@imap.example', HERALD_BOUNCE_ADDRESS: 'nope' },
      /HERALD_BOUNCE_ADDRESS must be an address/,
    ],
    [
      { HERALD_BOUNCE_IMAP_URL: 'imaps://a%40x.org:pw@imap.example', HERALD_BOUNCE_IMAP_DONE: 'INBOX' },
      /must differ/,
    ],
    [
      { HERALD_BOUNCE_IMAP_URL: 'imaps://a%40x.org:pw@imap.example', HERALD_BOUNCE_IMAP_DONE: 'a//b' },
      /folder name/,
    ],
    [
      { HERALD_BOUNCE_IMAP_URL: 'imaps://a%40x.org:secret-pw@imap.example?tls=none' },
      /^HERALD_BOUNCE_IMAP_URL \?tls=none goes with imap:\/\//,
    ],
  ])('%o is refused with one clear line', (vars, message) => {
    let error: unknown;
    try {
      env(vars);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('secret-pw');
    expect((error as Error).message).not.toContain('\n');
  });
});
