/** The programs the bench drives; it installs nothing, so it checks for them before anything else. */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { SMTP_SINK } from './smtp-sink.js';
import { SMTP_SOURCE } from './smtp-source.js';

export const INSTALL_HINT = 'apt-get install -y wrk postfix';

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && executable(join(dir, name)));
}

/** Names of the required programs that are missing (empty when all are there). */
export function missingTools(): string[] {
  const missing: string[] = [];
  if (!onPath('wrk')) missing.push('wrk');
  if (!executable(SMTP_SINK)) missing.push(SMTP_SINK);
  if (!executable(SMTP_SOURCE)) missing.push(SMTP_SOURCE);
  return missing;
}

export function hasPsql(): boolean {
  return onPath('psql');
}
