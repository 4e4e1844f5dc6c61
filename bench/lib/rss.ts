/**
 * Peak resident memory of a process from /proc/PID/status. VmHWM is the kernel's own high-water
 * mark, so sampling only has to happen before the process exits; VmRSS is sampled as well in case
 * a kernel does not report VmHWM.
 */
import { readFileSync } from 'node:fs';

function readKb(pid: number): { hwm: number; rss: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { hwm: field('VmHWM'), rss: field('VmRSS') };
}

export interface RssSampler {
  /** Samples once more (call just before stopping the process) and returns the peak in MB. */
  finish(): number;
  peakMb(): number;
}

export function sampleRss(pid: number, intervalMs = 250): RssSampler {
  let peakKb = 0;
  const sample = () => {
    const kb = readKb(pid);
    if (kb !== undefined) peakKb = Math.max(peakKb, kb.hwm, kb.rss);
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return {
    finish() {
      sample();
      clearInterval(timer);
      return peakKb / 1024;
    },
    peakMb: () => peakKb / 1024,
  };
}
