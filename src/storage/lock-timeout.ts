/**
 * True when SQLite refused a statement because another process held its lock past the wait
 * (storage/sqlite/lock-wait.ts): a failure of the store at that moment, not of what was written.
 */
export function isLockTimeout(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * True when the store refused a write for want of room or of write access, whatever was written:
 * SQLite's full disk, I/O errors and read-only database, PostgreSQL's `disk_full` and read-only
 * transactions, a file write's `ENOSPC` or `EROFS`.
 */
export function refusesWrites(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return (
    code === 'SQLITE_FULL' ||
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_READONLY') ||
    code === '53100' ||
    code === '25006' ||
    code === 'ENOSPC' ||
    code === 'EROFS'
  );
}
