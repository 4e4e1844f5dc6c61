import { describe, expect, it } from 'vitest';
import { statementRowCounts } from '../../src/storage/bulk-insert.js';

describe('the row counts of multi-row inserts', () => {
  it('on SQLite, insert any number of rows in statements of powers of two, largest first, ten sizes in all', () => {
    const sizes = new Set<number>();
    for (let total = 1; total <= 1000; total++) {
      const counts = statementRowCounts(total, true);
      expect(counts.reduce((sum, count) => sum + count, 0)).toBe(total);
      for (const [i, count] of counts.entries()) {
        expect(Math.log2(count) % 1).toBe(0);
        if (i > 0) expect(count).toBeLessThan(counts[i - 1]!);
        sizes.add(count);
      }
    }
    expect(statementRowCounts(500, true)).toEqual([256, 128, 64, 32, 16, 4]);
    expect(sizes.size).toBe(10);
  });

  it('on a backend that keeps no statement, insert them in one', () => {
    expect(statementRowCounts(500, false)).toEqual([500]);
    expect(statementRowCounts(1, false)).toEqual([1]);
  });
});
