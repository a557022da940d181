/**
 * The overspend bound on `dist/cpd`: concurrent requests of one wallet (or one API key's spend
 * limit) take it below zero by at most one request's real cost, whatever the request's shape, on
 * one process and on two; and a wallet is spent to its last cents rather than refused while money
 * is left. The upstream tells the truth: it answers `n` choices and stops each at max_tokens.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import type { RunningBinary } from '../../support/binary';
import { type Answer, MICROS_PER_TOKEN, type WalletBed, startWalletBed } from '../../support/wallet-binary';

let bed: WalletBed;
let one: RunningBinary;
let two: RunningBinary;

beforeAll(async () => {
  // Requests at the margin wait up to 30 s: what is served does not hang on the machine's speed.
  bed = await startWalletBed({ replicas: 2, env: { ROUTER_ADMISSION_WAIT: '30s' } });
  [one, two] = bed.nodes as [RunningBinary, RunningBinary];
}, 120_000);
afterAll(() => bed?.close());
afterEach(() => bed.up.reset());

const statusesOf = (answers: Answer[]) => answers.map((a) => (a.status === 200 && a.chunks.length > 0 && !a.done ? 0 : a.status));
const served = (answers: Answer[]) => answers.filter((a) => a.status === 200).length;

describe('n choices are in the hold', () => {
  // 10 prompt tokens + 20 choices × 100 tokens: one request really costs 2.01.
  const N_CHOICES = { model: 'm1', messages: [{ role: 'user', content: 'write' }], n: 20, max_tokens: 100 };
  const REQUEST_COST = (10n + 20n * 100n) * MICROS_PER_TOKEN;

  beforeEach(() => bed.up.set({ content: 'word '.repeat(200) }));

  test('60 parallel requests of n=20, max_tokens=100 on a 10.00 wallet: below zero by at most one request', async () => {
    const { userId, key } = await bed.fundedKey(10_000_000n);
    const answers = await Promise.all(Array.from({ length: 60 }, () => bed.chat(one, key, N_CHOICES)));
    expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
    // A full answer has its 20 choices of 100 tokens.
    const full = answers.find((a) => a.status === 200 && a.usage.completion_tokens === 2000);
    expect(full?.body.choices).toHaveLength(20);
    const balance = await bed.balanceOf(userId);
    expect(balance).toBeLessThanOrEqual(0n);
    expect(balance).toBeGreaterThan(-REQUEST_COST);
    await bed.expectBooksBalanced();
  }, 60_000);

  test('the same as streams over two processes', async () => {
    const { userId, key } = await bed.fundedKey(10_000_000n);
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => bed.chat(i % 2 ? two : one, key, { ...N_CHOICES, stream: true })));
    expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
    expect(served(answers)).toBeGreaterThan(0);
    const balance = await bed.balanceOf(userId);
    expect(balance).toBeLessThanOrEqual(0n);
    expect(balance).toBeGreaterThan(-REQUEST_COST);
    await bed.expectBooksBalanced();
  }, 60_000);

  test('a key with spend_limit 1 spends at most one request past it', async () => {
    const { keyId, key } = await bed.fundedKey(10_000_000n, { spend_limit: 1 });
    const answers = await Promise.all(Array.from({ length: 60 }, () => bed.chat(one, key, N_CHOICES)));
    expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
    const spent = await bed.spentBy(keyId);
    expect(spent).toBeGreaterThanOrEqual(1_000_000n);
    expect(spent).toBeLessThan(1_000_000n + REQUEST_COST);
    await bed.expectBooksBalanced();
  }, 60_000);
});

test('a text part carrying an `image_url` key counts as text: 40 parallel requests of 20 000 words on a 10.00 wallet serve one', async () => {
  // The upstream counts what the words are: 20 000 tokens, and 10 more for the template.
  bed.up.set({ promptTokens: 20_010 });
  const { userId, key } = await bed.fundedKey(10_000_000n);
  const body = { model: 'm1', messages: [{ role: 'user', content: [{ type: 'text', text: 'word '.repeat(20_000), image_url: null }] }], max_tokens: 5 };
  const answers = await Promise.all(Array.from({ length: 40 }, () => bed.chat(one, key, body)));
  expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
  expect(served(answers)).toBe(1);
  const balance = await bed.balanceOf(userId);
  expect(balance).toBeGreaterThan(-(20_010n + 5n) * MICROS_PER_TOKEN);
  await bed.expectBooksBalanced();
}, 60_000);

describe('the last cents are served', () => {
  // No max_tokens: the default hold (4096 tokens, 4.24 with the prompt bound) is above the whole
  // wallet. One request really costs 10 prompt + 5 completion tokens, and streams for ~150 ms.
  const PLAIN = { model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true };
  const REQUEST_COST = 15n * MICROS_PER_TOKEN;
  beforeEach(() => bed.up.set({ chunkDelayMs: 20 }));

  // One at a time (each request at the margin, waiting for the one before it), 100 such requests
  // outlast the default ROUTER_ADMISSION_WAIT of 10 s and are refused with money left.
  test('balance 1.00, 100 parallel streams over two processes: served side by side, the wallet ends at zero or just below', async () => {
    const { userId, key } = await bed.fundedKey(1_000_000n);
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => bed.chat(i % 2 ? two : one, key, PLAIN)));
    expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
    expect(bed.up.stats.streamsPeak).toBeGreaterThanOrEqual(3);
    const balance = await bed.balanceOf(userId);
    expect(balance).toBeLessThanOrEqual(0n);
    expect(balance).toBeGreaterThan(-REQUEST_COST);
    await bed.expectBooksBalanced();
  }, 90_000);

  test('a key with spend_limit 1.00, 100 parallel streams over two processes: served side by side, the limit spent and at most one request past it', async () => {
    const { keyId, key } = await bed.fundedKey(10_000_000n, { spend_limit: 1 });
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => bed.chat(i % 2 ? two : one, key, PLAIN)));
    expect(statusesOf(answers).filter((s) => s !== 200 && s !== 402)).toEqual([]);
    expect(bed.up.stats.streamsPeak).toBeGreaterThanOrEqual(3);
    const spent = await bed.spentBy(keyId);
    expect(spent).toBeGreaterThanOrEqual(1_000_000n);
    expect(spent).toBeLessThan(1_000_000n + REQUEST_COST);
    await bed.expectBooksBalanced();
  }, 90_000);
});
