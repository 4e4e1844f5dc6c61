import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Every test file opens its own database; files run in parallel processes.
    pool: 'forks',
    reporters: ['default'],
  },
});
