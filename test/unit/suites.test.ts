import { describe, expect, it } from 'vitest';
import { findChromium, recordSkippedSuite, skippedSuites } from '../suites.js';

describe('findChromium', () => {
  const table: [string, string | undefined, string[], string | null][] = [
    [
      'the explicit path when it is executable',
      '/opt/chrome',
      ['/opt/chrome', '/usr/bin/chromium'],
      '/opt/chrome',
    ],
    [
      'nothing when the explicit path is not there, even if a usual one is',
      '/opt/none',
      ['/usr/bin/chromium'],
      null,
    ],
    [
      'the first usual path that exists',
      undefined,
      ['/usr/bin/chromium-browser'],
      '/usr/bin/chromium-browser',
    ],
    ['nothing when no usual path exists', undefined, [], null],
  ];
  it.each(table)('finds %s', (_what, explicit, present, expected) => {
    const found = findChromium(explicit, ['/usr/bin/chromium', '/usr/bin/chromium-browser'], (f) =>
      present.includes(f),
    );
    if (expected === null) {
      expect('missing' in found && found.missing).toMatch(/HERALD_CHROMIUM_PATH/);
    } else {
      expect(found).toEqual({ path: expected });
    }
  });
});

describe('skipped suites', () => {
  it('are recorded once each, with their reason, for the closing line', () => {
    const env: NodeJS.ProcessEnv = {};
    // Kept here, not printed: a run that has Chromium must not show a notice saying it has none.
    const notices: string[] = [];
    const warn = (notice: string) => notices.push(notice);
    recordSkippedSuite(env, 'browser (Chromium)', 'no Chromium', warn);
    recordSkippedSuite(env, 'browser (Chromium)', 'no Chromium', warn);
    recordSkippedSuite(env, 'PostgreSQL', 'HERALD_TEST_PG_URL is not set', warn);
    expect(skippedSuites(env)).toEqual({
      'browser (Chromium)': 'no Chromium',
      PostgreSQL: 'HERALD_TEST_PG_URL is not set',
    });
    expect(notices.map((notice) => notice.trim())).toEqual([
      'browser (Chromium) suite SKIPPED: no Chromium.',
      'PostgreSQL suite SKIPPED: HERALD_TEST_PG_URL is not set.',
    ]);
  });
});
