import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * `npm install` on the oldest Node that package.json allows prints no EBADENGINE warning: every
 * locked package's `engines.node` admits that version (cookie 2 wanted Node ≥ 22 and warned).
 */
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
};

describe('engines', () => {
  const oldest = semver.minVersion(manifest.engines.node)!.version;

  it(`every locked package runs on Node ${oldest}, the oldest package.json allows`, () => {
    const refusing = Object.entries(lock.packages)
      .filter(([name]) => name !== '')
      .flatMap(([name, entry]) => {
        const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
        return range !== undefined && !semver.satisfies(oldest, range)
          ? [`${name}@${entry.version} (${range})`]
          : [];
      });
    expect(refusing).toEqual([]);
  });
});
