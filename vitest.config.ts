import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';

/**
 * One suite, run per storage backend: the integration and process tests run on SQLite and, when
 * HERALD_TEST_PG_URL names a PostgreSQL server, again on PostgreSQL, each test file in a fresh
 * database. In CI PostgreSQL is required: a missing server fails the run instead of skipping it.
 */
const pgUrl = process.env.HERALD_TEST_PG_URL;
if (!pgUrl) {
  if (process.env.CI)
    throw new Error('CI must set HERALD_TEST_PG_URL: the PostgreSQL suite cannot be skipped in CI');
  // The config is evaluated once per project; say it once.
  if (!process.env.HERALD_PG_SKIP_NOTICE) {
    process.env.HERALD_PG_SKIP_NOTICE = '1';
    console.warn(
      '\n  PostgreSQL suite SKIPPED: HERALD_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres).\n',
    );
  }
}

const perBackend = ['test/integration/**/*.test.ts', 'test/process/**/*.test.ts'];

const projects: TestProjectInlineConfiguration[] = [
  { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
  {
    extends: true,
    test: { name: 'sqlite', include: perBackend, env: { HERALD_TEST_DATABASE: 'sqlite' } },
  },
  { extends: true, test: { name: 'browser', include: ['test/browser/**/*.test.ts'] } },
];
if (pgUrl) {
  projects.push({
    extends: true,
    test: {
      name: 'postgres',
      include: [...perBackend, 'test/postgres/**/*.test.ts'],
      env: { HERALD_TEST_DATABASE: 'postgres', HERALD_TEST_PG_URL: pgUrl },
    },
  });
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
    projects,
  },
});
