import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { helpers } from '../../src/dashboard/format.js';

describe("the SMTP page's next probe of a relay that is down", () => {
  const now = Date.UTC(2026, 11, 1, 12, 0, 0);

  it('is a time while it is ahead', () => {
    expect(helpers.nextProbe(now + 30_000, now)).toBe(', next at 2026-12-01 12:00:30 UTC');
  });

  it('is due now once its time has passed, never a time in the past', () => {
    expect(helpers.nextProbe(now, now)).toBe(', the next one due now');
    expect(helpers.nextProbe(now - 5_000, now)).toBe(', the next one due now');
  });

  it('is left out when none is set', () => {
    expect(helpers.nextProbe(null, now)).toBe('');
  });
});

describe("the key page's curl example", () => {
  it('names any template as the shell and JSON read it back', () => {
    for (const name of ['welcome', `it's"<b>`, "a'b'c", 'back\\slash', 'dollar $HOME `x`']) {
      const word = helpers.shellWord(helpers.sendExample(name));
      const body = execFileSync('sh', ['-c', `printf %s ${word}`], { encoding: 'utf8' });
      expect(JSON.parse(body)).toEqual({
        template: name,
        to: 'jane@example.org',
        data: { user_name: 'Jane' },
      });
    }
  });
});
