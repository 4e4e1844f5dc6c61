import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Makes a directory and any missing parents, each with `mode`, and throws the system's error for
 * the first that cannot be made. Made one level at a time: Node's recursive `mkdirSync` retries a
 * parent that exists but refuses new entries with ENOENT (a path under `/proc`) without end,
 * holding the process where a start-up should fail with one line.
 */
export function makeDirectory(dir: string, mode?: number): void {
  const missing: string[] = [];
  for (let current = path.resolve(dir); !existsSync(current); current = path.dirname(current)) {
    missing.push(current);
    if (path.dirname(current) === current) break;
  }
  for (const level of missing.reverse()) {
    try {
      mkdirSync(level, { mode });
    } catch (error) {
      // Made meanwhile by another process starting at the same time.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
