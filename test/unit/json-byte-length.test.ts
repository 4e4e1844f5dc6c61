import { describe, expect, it } from 'vitest';
import { canonicalJson, jsonByteLength } from '../../src/domain/canonical-json.js';

describe('jsonByteLength', () => {
  it('is the length of the canonical JSON, whatever the order of keys', () => {
    const values = [
      { b: 1, a: 'é', c: [1, { z: null, y: 'naïve 😀' }] },
      { template: 'x', data: { '10': 1, '2': 2, name: 'Jo "Q"\n' } },
      'plain',
      [],
      null,
    ];
    for (const value of values) expect(jsonByteLength(value)).toBe(Buffer.byteLength(canonicalJson(value)));
  });

  it('measures a value nested too deep for JSON.stringify', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = { k: deep };
    expect(jsonByteLength(deep)).toBe(100_000 * '{"k":}'.length + '"x"'.length);
  });
});
