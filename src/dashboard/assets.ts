import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the dashboard's views and public files are, and the static assets it serves. `tsc`
 * compiles only the TypeScript, so when this module runs from dist/ the .eta and public files are
 * found in the package's src/dashboard instead (the package ships its src/).
 */
function dashboardRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [here, path.resolve(here, '../../src/dashboard')];
  const found = candidates.find((dir) => existsSync(path.join(dir, 'views', 'layout.eta')));
  if (found === undefined) throw new Error(`dashboard views not found (looked in ${candidates.join(', ')})`);
  return found;
}

export const DASHBOARD_ROOT = dashboardRoot();
export const VIEWS_DIR = path.join(DASHBOARD_ROOT, 'views');

export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  /** Hash of the content, part of the URL: a changed file gets a new URL, so caching can be forever. */
  readonly version: string;
}

export interface Assets {
  readonly files: ReadonlyMap<string, Asset>;
  readonly urls: {
    readonly css: string;
    readonly pagesCss: string;
    readonly js: string;
    readonly htmx: string;
  };
}

async function load(file: string, type: string): Promise<Asset> {
  const body = await readFile(file);
  return { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) };
}

export async function loadAssets(): Promise<Assets> {
  const htmxFile = createRequire(import.meta.url).resolve('htmx.org/dist/htmx.min.js');
  const entries: [string, Asset][] = [
    ['app.css', await load(path.join(DASHBOARD_ROOT, 'public', 'app.css'), 'text/css; charset=utf-8')],
    ['pages.css', await load(path.join(DASHBOARD_ROOT, 'public', 'pages.css'), 'text/css; charset=utf-8')],
    ['app.js', await load(path.join(DASHBOARD_ROOT, 'public', 'app.js'), 'text/javascript; charset=utf-8')],
    ['htmx.min.js', await load(htmxFile, 'text/javascript; charset=utf-8')],
  ];
  const files = new Map(entries);
  const url = (name: string) => `/assets/${name}?v=${files.get(name)?.version ?? ''}`;
  return {
    files,
    urls: { css: url('app.css'), pagesCss: url('pages.css'), js: url('app.js'), htmx: url('htmx.min.js') },
  };
}
