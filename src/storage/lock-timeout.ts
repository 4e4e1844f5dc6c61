/**
 * True when SQLite refused a statement because another process held its lock past the wait
 * (storage/sqlite/lock-wait.ts): a failure of the store at that moment, not of what was written.
 */
export function isLockTimeout(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}
