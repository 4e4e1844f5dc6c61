/** Facts about the machine a run was made on, for the report. */
import { availableParallelism, cpus, release, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

export interface Machine {
  nproc: number;
  memoryGiB: number;
  cpu: string;
  os: string;
  kernel: string;
  node: string;
  wrk: string;
}

function osName(): string {
  try {
    return /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function wrkVersion(): string {
  // wrk -v prints its version line, then its usage, and exits 1.
  const run = spawnSync('wrk', ['-v'], { encoding: 'utf8', timeout: 5_000 });
  return (
    /wrk [^\n]*/.exec(`${run.stdout ?? ''}${run.stderr ?? ''}`)?.[0]?.replace(/\s+Copyright.*/, '') ??
    'unknown'
  );
}

export function machineFacts(): Machine {
  return {
    nproc: availableParallelism(),
    memoryGiB: totalmem() / 1024 ** 3,
    cpu: cpus()[0]?.model ?? 'unknown',
    os: osName(),
    kernel: release(),
    node: process.version,
    wrk: wrkVersion(),
  };
}
