import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Starts a worker thread from a module beside the caller, also when Herald runs from its TypeScript
 * source (tests, `npm run dev`): then the thread registers tsx before it imports the `.ts` file.
 * `base` is the caller's `import.meta.url`, `name` the module's name without its extension.
 */
export function startWorkerThread(base: string, name: string): Worker {
  if (!base.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, base));
  const tsx = createRequire(base)
    .resolve('tsx/package.json')
    .replace(/package\.json$/, 'dist/esm/api/index.mjs');
  const entry = new URL(`./${name}.ts`, base).href;
  return new Worker(
    `import(${JSON.stringify(pathToFileURL(tsx).href)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`,
    { eval: true },
  );
}
