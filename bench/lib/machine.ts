/** Facts about the machine a run was made on, for the report. */
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
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

/** The 1, 5 and 15 minute load averages: other work on the machine skews every figure. */
export function loadAverage(): [number, number, number] {
  const [one = 0, five = 0, fifteen = 0] = loadavg();
  return [one, five, fifteen];
}

/** A warning when other processes were already keeping the CPUs busy. */
export function busyWarning(load: readonly number[], nproc: number): string | undefined {
  const one = load[0] ?? 0;
  if (one <= 0.5 * nproc) return undefined;
  return `the machine was busy before the run started (load average ${one.toFixed(2)} on ${nproc} CPUs): other processes competed for the CPU, so the figures are less reliable than on an idle machine`;
}
