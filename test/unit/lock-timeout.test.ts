import { describe, expect, it } from 'vitest';
import { isLockTimeout, refusesWrites } from '../../src/storage/lock-timeout.js';

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

describe('refusesWrites', () => {
  it('knows a store out of room or write access, on either backend, and nothing else', () => {
    for (const code of ['SQLITE_FULL', 'SQLITE_IOERR_WRITE', 'SQLITE_READONLY', '53100', '25006', 'ENOSPC'])
      expect(refusesWrites(Object.assign(new Error('refused'), { code })), code).toBe(true);
    for (const other of [
      { code: 'SQLITE_BUSY' },
      { code: 'SQLITE_CONSTRAINT_FOREIGNKEY' },
      { code: '23503' },
      { code: '57P01' },
      { code: '53300' },
      new Error('database or disk is full'),
      null,
      'SQLITE_FULL',
    ])
      expect(refusesWrites(other)).toBe(false);
  });
});
