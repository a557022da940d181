/**
 * Token counting: o200k_base with OpenAI's chat accounting, and the cache of long texts' counts
 * (a conversation sends its earlier messages again with every turn).
 */
import { describe, expect, test } from 'bun:test';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countPromptTokens, countText } from '../../../src/modules/router/router.tokens';

const paragraph = (tag: string) => `${tag}: ${'The quick brown fox jumps over the lazy dog, then counts its tokens. '.repeat(40)}`;

describe('token counting', () => {
  test('short and long texts count as the tokenizer does, the second time too (from the cache)', async () => {
    for (const text of ['', 'hi', 'short text, counted each time', paragraph('long'), `${paragraph('unicode')} 数一数这些词 🦊`]) {
      const expected = text ? countTokens(text) : 0;
      expect(await countText(text)).toBe(expected);
      expect(await countText(text)).toBe(expected);
    }
  });

  test('long texts of one length, or with one prefix, are each counted for themselves', async () => {
    const runs = 'abcd'.repeat(500);
    const words = 'a b '.repeat(500);
    expect(words.length).toBe(runs.length);
    expect(countTokens(words)).not.toBe(countTokens(runs));
    const longer = `${runs} and then some words`;
    for (const text of [runs, words, longer]) expect(await countText(text)).toBe(countTokens(text));
  });

  test('each turn of a growing conversation counts its whole prompt', async () => {
    const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: paragraph('system') }];
    for (let turn = 0; turn < 6; turn++) {
      messages.push({ role: 'user', content: paragraph(`question ${turn}`) });
      const expected = 3 + messages.reduce((n, m) => n + 3 + countTokens(m.content), 0);
      expect(await countPromptTokens({ messages })).toBe(expected);
      messages.push({ role: 'assistant', content: paragraph(`answer ${turn}`) });
    }
  });
});
