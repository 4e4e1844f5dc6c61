import { chmodSync, existsSync } from 'node:fs';
import { SqliteDatabase as Database } from './driver.js';

/**
 * A consistent copy of a live SQLite database through SQLite's online backup API: the server may
 * keep writing meanwhile, and the copy is the state of one moment, WAL contents included. The copy
 * holds everything the database does (API key hashes, encrypted SMTP passwords), so it is made
 * readable by its owner only.
 */
export async function backupSqlite(file: string, to: string): Promise<{ pages: number }> {
  if (!existsSync(file)) throw new Error(`No database at ${file}: nothing to back up`);
  const source = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const result = await source.backup(to);
    chmodSync(to, 0o600);
    return { pages: result.totalPages };
  } finally {
    source.close();
  }
}
