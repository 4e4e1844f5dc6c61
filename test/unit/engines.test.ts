import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { SQLITE_DRIVER } from '../../src/storage/sqlite/driver.js';

/**
 * Every locked package's `engines.node` admits the oldest Node of each line that package.json
 * allows (cookie 2 wanted Node ≥ 22 and warned), but for SQLite's driver, which comes as two releases
 * (src/storage/sqlite/driver.ts): each Node Herald supports loads one whose engines admit it.
 */
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
};

/** A package that may refuse the oldest Node, and the one that serves that Node instead. */
const SERVED_INSTEAD_BY: Record<string, string> = {
  'node_modules/better-sqlite3': 'node_modules/better-sqlite3-node20',
};

function admits(name: string, version: string): boolean {
  const entry = lock.packages[name];
  const range = entry === undefined || Array.isArray(entry.engines) ? undefined : entry.engines?.node;
  return entry !== undefined && (range === undefined || semver.satisfies(version, range));
}

/** The oldest release of each line package.json allows: 20.19.0, 22.13.0, 24.0.0. */
const oldestOfEachLine = new semver.Range(manifest.engines.node).set.map(
  (comparators) => semver.minVersion(comparators.map((comparator) => comparator.value).join(' '))!.version,
);
const oldest = oldestOfEachLine[0]!;

describe('engines', () => {
  it('allows the LTS lines only, each from its oldest supported release', () => {
    expect(oldestOfEachLine).toEqual(['20.19.0', '22.13.0', '24.0.0']);
    for (const odd of ['21.7.3', '23.11.1']) expect(semver.satisfies(odd, manifest.engines.node)).toBe(false);
  });

  it.each(oldestOfEachLine)(
    'every locked package runs on Node %s, the oldest of its line package.json allows',
    (version) => {
      const refusing = Object.entries(lock.packages)
        .filter(([name]) => name !== '')
        .flatMap(([name, entry]) => {
          const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
          const instead = SERVED_INSTEAD_BY[name];
          if (instead !== undefined && admits(instead, version)) return [];
          return range !== undefined && !semver.satisfies(version, range)
            ? [`${name}@${entry.version} (${range})`]
            : [];
        });
      expect(refusing).toEqual([]);
    },
  );

  it(`loads a SQLite driver whose engines admit this Node (${process.version})`, () => {
    expect(admits(`node_modules/${SQLITE_DRIVER}`, process.version)).toBe(true);
    // The release for later Nodes serves every supported Node from 22 on.
    expect(admits('node_modules/better-sqlite3', '22.13.0')).toBe(true);
    expect(admits('node_modules/better-sqlite3-node20', oldest)).toBe(true);
  });
});
