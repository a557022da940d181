/** Random ids: drawn from a pool of CSPRNG bytes that refills, uniform over base62, never repeated. */
import { isRope } from 'bun:jsc';
import { describe, expect, test } from 'bun:test';
import { newId, randomBase62 } from '../../src/platform/ids';

describe('randomBase62', () => {
  test('has the length asked for, base62 characters only, across many refills of the pool', () => {
    // 20 000 × 20 characters draw about 100 pools of 4 KiB.
    const ids = Array.from({ length: 20_000 }, () => randomBase62(20));
    for (const id of ids) expect(id).toMatch(/^[0-9A-Za-z]{20}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(randomBase62(1)).toMatch(/^[0-9A-Za-z]$/);
    expect(randomBase62(4096 + 7)).toHaveLength(4096 + 7);
  });

  test('is uniform over the 62 characters (chi-squared under its one-in-a-million critical value)', () => {
    const counts = new Map<string, number>();
    const sample = randomBase62(620_000);
    for (const c of sample) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = sample.length / 62;
    let chi2 = 0;
    for (const n of counts.values()) chi2 += (n - expected) ** 2 / expected;
    // 61 degrees of freedom: P(chi2 > 129) ≈ 1e-6 (Wilson–Hilferty). A modulo bias (byte % 62
    // over all 256 values) would put chi2 in the thousands at this sample size.
    expect(chi2).toBeLessThan(129);
  });
});

describe('newId', () => {
  test('prefix, 9 characters of time, 16 random; later ids sort after earlier ones', () => {
    const first = newId('usr');
    const at = Date.now();
    while (Date.now() <= at); // the next millisecond
    const second = newId('usr');
    expect(first).toMatch(/^usr_[0-9A-Za-z]{25}$/);
    expect(first < second).toBe(true);
  });
});

describe('ids are made as one string', () => {
  // A rope (a string of pieces appended one by one) is flattened by whatever reads it next: a batch
  // of download records serialised as JSON paid for that on every row.
  test('newId and randomBase62 return flat strings, not ropes', () => {
    for (const id of [newId('dl'), randomBase62(20), randomBase62(1000)]) expect(isRope(id)).toBe(false);
  });
});
