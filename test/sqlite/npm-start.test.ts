import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/dead-relays.js';
import { heraldProcessEnv, killGroup, REPO_ROOT, waitForHealthy } from '../helpers/processes.js';

/**
 * `npm start` is how the README runs Herald, and how a container or a process manager often does
 * (`CMD npm start`): a SIGTERM to npm must reach Herald, which then stops gracefully. npm passes it
 * to the script's process, so the script must be Herald itself, not a shell waiting for it.
 * Runs the build that `npm install` made (the prepare script), on the embedded default.
 */

const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-npm-start-'));
let npm: ChildProcess | undefined;

afterAll(() => {
  if (npm !== undefined) killGroup(npm);
  rmSync(dataDir, { recursive: true, force: true });
});

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/healthz`)).status === 200;
  } catch {
    return false;
  }
}

describe('npm start', () => {
  it('stops Herald gracefully when npm is sent SIGTERM', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    let output = '';
    npm = spawn('npm', ['start'], {
      cwd: REPO_ROOT,
      env: heraldProcessEnv({
        HERALD_DATA_DIR: dataDir,
        HERALD_PORT: String(port),
        HERALD_HOST: '127.0.0.1',
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
      // A group of its own, so afterAll can end whatever is left of it.
      detached: true,
    });
    npm.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    npm.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    // 'close': npm and every process that holds its output (Herald's) are gone.
    const closed = once(npm, 'close');
    await waitForHealthy(url);

    npm.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Herald did not stop after npm got SIGTERM\n${output}`)),
        20_000,
      );
    });
    await Promise.race([closed, deadline]).finally(() => clearTimeout(timer));
    expect(await answers(url)).toBe(false);
    expect(output).toContain('stopping: finishing requests and deliveries in flight');
    expect(output).toContain('Herald stopped');
  });
});
