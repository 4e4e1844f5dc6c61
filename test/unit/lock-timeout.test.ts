import { describe, expect, it } from 'vitest';
import { isLockTimeout } from '../../src/storage/lock-timeout.js';

describe('isLockTimeout', () => {
  it("knows SQLite's refusals for a lock held by another process, and nothing else", () => {
    expect(isLockTimeout(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }))).toBe(true);
    expect(isLockTimeout({ code: 'SQLITE_BUSY_SNAPSHOT' })).toBe(true);
    for (const other of [
      { code: 'SQLITE_CONSTRAINT_UNIQUE' },
      { code: '23505' },
      new Error('refused'),
      null,
      'SQLITE_BUSY',
    ])
      expect(isLockTimeout(other)).toBe(false);
  });
});
