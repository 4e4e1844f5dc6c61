import type { Reporter, SerializedError, TestModule } from 'vitest/node';
import { skippedSuites } from './suites.js';

/**
 * Prints one plain closing line, `vitest: N passed, N failed, N skipped[, N suites skipped (…)]`,
 * after the default reporter's summary, so that tools reading only a run's last lines see the
 * counts, including whole suites this machine could not run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
  ): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    // Errors outside any test (a file that failed to load, a failing beforeAll, an uncaught
    // exception) fail the run too, and are counted apart so the line never says "0 failed" then.
    let errors = unhandledErrors.length;
    // Suites a test file found it could not run here (test/suites.ts skipSuite).
    const skippedHere: Record<string, string> = {};
    for (const module of testModules) {
      errors += module.errors().length;
      for (const test of module.children.allTests()) {
        const suite = test.meta().skippedSuite;
        if (suite !== undefined) skippedHere[suite.name] = suite.reason;
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    // A suite left out (no Chromium, no PostgreSQL) counts as skipped too, and is named.
    const suites = Object.entries({ ...skippedSuites(process.env), ...skippedHere });
    const suiteNote =
      suites.length === 0
        ? ''
        : `, ${suites.length} suite${suites.length === 1 ? '' : 's'} skipped (${suites.map(([name, why]) => `${name}: ${why}`).join('; ')})`;
    const errorNote = errors === 0 ? '' : `, ${errors} error${errors === 1 ? '' : 's'} outside tests`;
    process.stdout.write(
      `\nvitest: ${passed} passed, ${failed} failed, ${skipped} skipped${errorNote}${suiteNote}\n`,
    );
  }
}
