/** The hashes and comparisons other modules build on, against known values. */
import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { safeEqual, sha256Hex } from '../../src/platform/crypto';

describe('sha256Hex', () => {
  test('matches the FIPS 180-2 vector and node:crypto for strings and bytes', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const key = 'bfvk-0123456789abcdefghijABCDEFGHIJ0123456789é';
    expect(sha256Hex(key)).toBe(createHash('sha256').update(key).digest('hex'));
    const bytes = new Uint8Array([0, 255, 1, 254]);
    expect(sha256Hex(bytes)).toBe(createHash('sha256').update(bytes).digest('hex'));
  });
});

describe('safeEqual', () => {
  test('equal strings only, whatever their lengths', () => {
    expect(safeEqual('token', 'token')).toBe(true);
    expect(safeEqual('token', 'tokeN')).toBe(false);
    expect(safeEqual('token', 'token-longer')).toBe(false);
    expect(safeEqual('', '')).toBe(true);
  });
});
