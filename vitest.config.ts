import { availableParallelism } from 'node:os';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { findChromium, recordSkippedSuite } from './test/suites.js';

/**
 * One suite, run per storage backend: the integration and process tests run on SQLite and, when
 * HERALD_TEST_PG_URL names a PostgreSQL server, again on PostgreSQL, each test file in a fresh
 * database. In CI PostgreSQL is required: a missing server fails the run instead of skipping it.
 */
const pgUrl = process.env.HERALD_TEST_PG_URL;
if (!pgUrl) {
  if (process.env.CI)
    throw new Error('CI must set HERALD_TEST_PG_URL: the PostgreSQL suite cannot be skipped in CI');
  // The config may be evaluated more than once; the notice is given once.
  recordSkippedSuite(
    process.env,
    'PostgreSQL',
    'HERALD_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)',
  );
}

/** The browser suite drives a real Chromium: HERALD_CHROMIUM_PATH, else the usual paths. */
const chromium = findChromium(process.env.HERALD_CHROMIUM_PATH);
if ('missing' in chromium) {
  if (process.env.CI) throw new Error(`CI must run the browser suite, but ${chromium.missing}`);
  recordSkippedSuite(process.env, 'browser (Chromium)', chromium.missing);
}

const perBackend = ['test/integration/**/*.test.ts', 'test/process/**/*.test.ts'];
/**
 * A worker of the per-backend suites runs its test files one after another in one process, loading
 * Herald's modules once instead of once per file (a sixth of the suite's time). Every file opens its
 * own database, servers and ports and closes them in its own hooks. The unit suite keeps a process
 * per file: it takes seconds either way, and run some forty files to a process, its files failed
 * inside the test runner with "Maximum call stack size exceeded".
 */
const sharedProcess = { isolate: false };
/** The per-backend suites start Herald as a process, from its build: brought up to date first. */
const buildFirst = ['./test/build-herald.ts'];

const projects: TestProjectInlineConfiguration[] = [
  { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
  {
    extends: true,
    test: {
      name: 'sqlite',
      include: [...perBackend, 'test/sqlite/**/*.test.ts'],
      globalSetup: buildFirst,
      ...sharedProcess,
      env: { HERALD_TEST_DATABASE: 'sqlite' },
    },
  },
];
if ('path' in chromium) {
  projects.push({
    extends: true,
    test: {
      name: 'browser',
      include: ['test/browser/**/*.test.ts'],
      env: { HERALD_CHROMIUM_PATH: chromium.path },
    },
  });
}
if (pgUrl) {
  projects.push({
    extends: true,
    test: {
      name: 'postgres',
      include: [...perBackend, 'test/postgres/**/*.test.ts'],
      globalSetup: buildFirst,
      ...sharedProcess,
      env: { HERALD_TEST_DATABASE: 'postgres', HERALD_TEST_PG_URL: pgUrl },
    },
  });
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The per-backend suites spend most of their time waiting on SMTP servers, Herald processes
    // and timers, not computing: two test files at a time keep even a two-core machine busy (the
    // default is one fewer worker than cores).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    reporters: ['default', './test/summary-reporter.ts'],
    projects,
  },
});
