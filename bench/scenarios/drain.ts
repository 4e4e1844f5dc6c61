/**
 * Waiting for Herald's queue to empty, bounded in time: the notification counts by state are read
 * from the SQLite file (read-only) a few times a second.
 */
import { join } from 'node:path';
import { openStateCounts, type StateCounts } from '../lib/sqlite-file.js';
import { progress } from '../lib/progress.js';
import type { Tracked } from '../lib/processes.js';

export function databaseFile(dataDir: string): string {
  return join(dataDir, 'herald.db');
}

/** Resolves with the last counts once nothing is queued or sending, or when `timeoutMs` is over. */
export async function waitDrained(
  dataDir: string,
  label: string,
  timeoutMs: number,
  process: Tracked,
): Promise<{ counts: StateCounts; drained: boolean }> {
  const view = openStateCounts(databaseFile(dataDir));
  let counts = view.read();
  progress.start(
    label,
    () => `queued ${counts.queued}  sending ${counts.sending}  sent ${counts.sent}  failed ${counts.failed}`,
  );
  const deadline = performance.now() + timeoutMs;
  try {
    while (counts.queued + counts.sending > 0 && performance.now() < deadline) {
      if (process.hasExited())
        throw new Error(`${process.name} exited while ${counts.queued} were still queued`);
      await new Promise((r) => setTimeout(r, 250));
      counts = view.read();
    }
    return { counts, drained: counts.queued + counts.sending === 0 };
  } finally {
    progress.stop();
    view.close();
  }
}
