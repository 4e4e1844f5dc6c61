import { accessSync, constants } from 'node:fs';
import type { TestContext } from 'vitest';

/**
 * Which optional test suites can run here. The browser suite needs Chromium, the PostgreSQL suite
 * a server; without them `npm test` runs everything else and says loudly what it skipped and why,
 * and the closing line counts the skipped suites. In CI nothing may be skipped silently: a missing
 * prerequisite fails the run instead.
 */

/** Where Chromium usually lives, after HERALD_CHROMIUM_PATH. */
export const CHROMIUM_CANDIDATES = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
  '/usr/bin/google-chrome-stable',
  '/snap/bin/chromium',
  '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
  '/Applications/Chromium.app/Contents/MacOS/Chromium',
];

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export type Found = { readonly path: string } | { readonly missing: string };

/** HERALD_CHROMIUM_PATH when set (and then it must work), else the first usual path that exists. */
export function findChromium(
  explicit: string | undefined,
  candidates: readonly string[] = CHROMIUM_CANDIDATES,
  isExecutable: (file: string) => boolean = executable,
): Found {
  if (explicit) {
    return isExecutable(explicit)
      ? { path: explicit }
      : { missing: `HERALD_CHROMIUM_PATH=${explicit} is not an executable file` };
  }
  const found = candidates.find(isExecutable);
  return found !== undefined
    ? { path: found }
    : { missing: `no Chromium at ${candidates.join(', ')}; set HERALD_CHROMIUM_PATH` };
}

/** The suites this run leaves out, with the reason, shared with the closing summary line. */
export const SKIPPED_SUITES_ENV = 'HERALD_TEST_SKIPPED_SUITES';

export function recordSkippedSuite(
  env: NodeJS.ProcessEnv,
  name: string,
  reason: string,
  warn: (notice: string) => void = (notice) => console.warn(notice),
): void {
  const list = JSON.parse(env[SKIPPED_SUITES_ENV] ?? '{}') as Record<string, string>;
  if (list[name] === undefined) {
    list[name] = reason;
    env[SKIPPED_SUITES_ENV] = JSON.stringify(list);
    warn(`\n  ${name} suite SKIPPED: ${reason}.\n`);
  }
}

export function skippedSuites(env: NodeJS.ProcessEnv): Record<string, string> {
  return JSON.parse(env[SKIPPED_SUITES_ENV] ?? '{}') as Record<string, string>;
}

declare module 'vitest' {
  interface TaskMeta {
    /** A whole suite this machine could not run, named with why, for the closing line. */
    skippedSuite?: { readonly name: string; readonly reason: string };
  }
}

/**
 * Skips a suite from inside a test file, where the prerequisite can only be found (root, a tmpfs
 * mount): says so loudly, and marks the test so the closing line counts the suite as skipped (test
 * files run in worker processes, whose environment the summary never sees).
 */
export function skipSuite(context: TestContext, name: string, reason: string): never {
  console.warn(`\n  ${name} suite SKIPPED: ${reason}.\n`);
  context.task.meta.skippedSuite = { name, reason };
  return context.skip(`${name}: ${reason}`);
}
