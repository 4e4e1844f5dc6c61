import { readFileSync } from 'node:fs';

/**
 * Herald's version, as package.json gives it: read once, from the package root, one level above
 * both `src/` (run with tsx) and `dist/` (the build).
 */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
