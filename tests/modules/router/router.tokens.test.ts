/**
 * Token counting: o200k_base with OpenAI's chat accounting, the cache of long texts' counts (a
 * conversation sends its earlier messages again with every turn), and long texts counted in
 * pieces with the event loop served between them.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
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

  test('a long text counted in pieces counts as it does whole: prose, code, JSON, CJK, irregular spacing', async () => {
    const root = join(import.meta.dir, '../../..');
    const texts = ['README.md', 'docs/gateway.md', 'src/modules/router/router.service.ts', 'node_modules/elysia/dist/index.mjs'].map((f) => readFileSync(join(root, f), 'utf8'));
    texts.push(JSON.stringify(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))).repeat(60));
    texts.push('数一数这些词，然后再数一遍。 Mixed 文本 with English words and 中文 characters. '.repeat(800));
    const chinese = '今天的天气很好，我们去公园散步吧。然后再回家吃饭！你觉得怎么样？好的：就这么办；走吧、快点。';
    texts.push(chinese.repeat(1200), `${chinese}English，混合，Text。`.repeat(700));
    texts.push("It's   a  test\n\n  with   odd   spacing, tabs\tand 123456 numbers 3.14159, 'quotes' and https://example.com/a b c. ".repeat(600));
    texts.push('x'.repeat(40_000)); // no cut point: counted whole
    for (const text of texts) {
      expect(text.length).toBeGreaterThan(20_000);
      expect(await countText(text)).toBe(countTokens(text));
    }
  });

  test('other work runs between the pieces of a long count, in English and in Chinese', async () => {
    for (const text of [paragraph('many pieces').repeat(60), '长长的中文提示，没有空格，一句接着一句。'.repeat(3000)]) {
      let ran = false;
      setImmediate(() => {
        ran = true;
      });
      expect(await countText(text)).toBe(countTokens(text));
      expect(ran).toBe(true);
    }
  });
});
