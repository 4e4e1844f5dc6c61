import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * What a process that serves the API loads: the MIME parser of bounce reports (mailparser, with
 * its HTML and charset tables), the IMAP client and the SMTP server that receives reports belong
 * to the processes that read bounces, and loading them everywhere cost the API process about
 * 13 MB of heap. Handlebars is loaded when a process first reads a template in its syntax.
 * Checked in a fresh process, since this one's test runner may load anything.
 */
describe('modules of a process that does not read bounces', () => {
  it('composing Herald loads neither the report parser, the IMAP client, the SMTP server nor Handlebars', () => {
    const script = `
      import { createRequire } from 'node:module';
      await import('./src/compose.ts');
      await import('./src/roles.ts');
      const loaded = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify(loaded.filter((file) => /node_modules\\/(mailparser|imapflow|smtp-server|handlebars)\\//.test(file))));
    `;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: new URL('../..', import.meta.url).pathname,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout.trim().split('\n').at(-1)!)).toEqual([]);
  });
});
