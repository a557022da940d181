/** The console's money formatting: API numbers become integer micro-units once; strings and sums come from those. */
import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { formatMicros, formatMoney, microsToNumber, parseAmount, toMicros } from '../../src/console/app/money';

describe('console money', () => {
  test('every amount the API can send (≤ 6 decimals, under a billion) converts to exactly its micro-units and back', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -999_999_999_999_999n, max: 999_999_999_999_999n }), (micros) => {
        const asJson = JSON.parse(JSON.stringify(microsToNumber(micros)));
        expect(toMicros(asJson)).toBe(micros);
      }),
    );
  });

  test('sums of micro-units are exact where float sums are not', () => {
    const total = [0.1, 0.2].map(toMicros).reduce((a, b) => a + b, 0n);
    expect(formatMicros(total, 'USD')).toBe('$0.30');
    expect(0.1 + 0.2).not.toBe(0.3);
  });

  test('formats with the site currency symbol, grouping, at least two and at most six decimals', () => {
    expect(formatMoney(0, 'USD')).toBe('$0.00');
    expect(formatMoney(1234567.5, 'USD')).toBe('$1,234,567.50');
    expect(formatMoney(-0.000125, 'CNY')).toBe('-¥0.000125');
    expect(formatMoney(12.3, 'CNY')).toBe('¥12.30');
    expect(formatMoney(0.00003, 'USD')).toBe('$0.00003');
  });

  test('parses typed amounts with a bounded number of decimals, signed only when asked', () => {
    expect(parseAmount('25', 2)).toBe(25_000_000n);
    expect(parseAmount(' 0.05 ', 2)).toBe(50_000n);
    expect(parseAmount('1.005', 2)).toBeNull();
    expect(parseAmount('-3', 2)).toBeNull();
    expect(parseAmount('-3.000001', 6, true)).toBe(-3_000_001n);
    for (const bad of ['', 'abc', '1e3', '1.', '.5', 'Infinity', '0x10']) expect(parseAmount(bad, 6, true)).toBeNull();
  });
});
