import { describe, expect, it } from 'vitest';
import { newRequestId } from '../../src/domain/request-id.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newRequestId', () => {
  it('issues version 7 UUIDs that sort in the order they were issued, within a millisecond too', () => {
    const ids = Array.from({ length: 5_000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(UUID_V7);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('keeps counting up when the clock goes back', () => {
    const now = Date.now() + 60_000;
    const first = newRequestId(now);
    const later = newRequestId(now - 5_000);
    expect(later > first).toBe(true);
  });

  it('starts a new millisecond with the time in its first 48 bits', () => {
    const now = Date.now() + 120_000;
    const id = newRequestId(now);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(now);
  });

  it('draws fresh random bits for every id, across refills of its pool', () => {
    const now = Date.now() + 180_000;
    // The last 48 bits are random in every id, never the counter.
    const tails = Array.from({ length: 1_000 }, () => newRequestId(now).slice(-12));
    expect(new Set(tails).size).toBe(tails.length);
  });
});
