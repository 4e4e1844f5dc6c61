import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { REPO_ROOT } from './helpers/processes.js';

/**
 * Global setup of the suites that start Herald as a process: brings dist/ up to date with the
 * source (`tsc -p tsconfig.build.json`, incremental: a few seconds when nothing changed), so those
 * processes run the current code the way `npm start` runs it, without compiling TypeScript at
 * every start. A source that does not compile fails the run here, with tsc's errors.
 */
export default function buildHerald(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: REPO_ROOT, stdio: 'inherit' });
}
