import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { REPO_ROOT } from './helpers/processes.js';

/** Set once the build is done: the sqlite and postgres projects both ask for it in one run. */
const BUILT = 'HERALD_TEST_DIST_BUILT';

/**
 * Global setup of the suites that start Herald as a process: builds dist/ from the source
 * (`tsc -p tsconfig.build.json`, once per `vitest run`), so those processes run the current code
 * the way `npm start` runs it, without compiling TypeScript at every start. A source that does not
 * compile fails the run here, with tsc's errors.
 */
export default function buildHerald(): void {
  if (process.env[BUILT] === '1') return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: REPO_ROOT, stdio: 'inherit' });
  process.env[BUILT] = '1';
}
