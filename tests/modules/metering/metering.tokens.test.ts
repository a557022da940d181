/**
 * Token counting: o200k_base with OpenAI's chat accounting, the cache of long texts' counts (a
 * conversation sends its earlier messages again with every turn), and the counting on a thread of
 * its own, so that neither loading the tables nor a long count holds up the event loop.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countPromptTokens, countTexts } from '../../../src/modules/metering/metering.tokens';

const paragraph = (tag: string) => `${tag}: ${'The quick brown fox jumps over the lazy dog, then counts its tokens. '.repeat(40)}`;

describe('token counting', () => {
  test('short and long texts count as the tokenizer does, the second time too (from the cache)', async () => {
    for (const text of ['', 'hi', 'short text, counted each time', paragraph('long'), `${paragraph('unicode')} 数一数这些词 🦊`]) {
      const expected = text ? countTokens(text) : 0;
      expect(await countTexts([text])).toBe(expected);
      expect(await countTexts([text])).toBe(expected);
    }
  });

  test('long texts of one length, or with one prefix, are each counted for themselves', async () => {
    const runs = 'abcd'.repeat(500);
    const words = 'a b '.repeat(500);
    expect(words.length).toBe(runs.length);
    expect(countTokens(words)).not.toBe(countTokens(runs));
    const longer = `${runs} and then some words`;
    for (const text of [runs, words, longer]) expect(await countTexts([text])).toBe(countTokens(text));
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
    for (const text of texts) {
      expect(text.length).toBeGreaterThan(20_000);
      expect(await countTexts([text])).toBe(countTokens(text));
    }
  });

  test('a fresh process counts on the counter thread, its event loop running while the tables load', async () => {
    const script = `
      import { countTexts } from ${JSON.stringify(join(import.meta.dir, '../../../src/modules/metering/metering.tokens.ts'))};
      let ticks = 0;
      const timer = setInterval(() => ticks++, 1);
      const count = await countTexts(['hello world']);
      clearInterval(timer);
      console.log(JSON.stringify({ count, ticks }));`;
    const child = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'inherit' });
    const { count, ticks } = JSON.parse(await new Response(child.stdout).text());
    expect(count).toBe(countTokens('hello world'));
    expect(ticks).toBeGreaterThanOrEqual(10);
  });

  test('other work runs while a long count runs, in English and in Chinese', async () => {
    for (const text of [paragraph('many pieces').repeat(60), '长长的中文提示，没有空格，一句接着一句。'.repeat(3000)]) {
      let ran = false;
      setImmediate(() => {
        ran = true;
      });
      expect(await countTexts([text])).toBe(countTokens(text));
      expect(ran).toBe(true);
    }
  });

  test('a run longer than 128 characters is counted 128 at a time: spaces, line breaks, signs, letters, Chinese without punctuation', async () => {
    const chinese = '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起';
    const runs = [' '.repeat(200_000), ' \n'.repeat(100_000), '-='.repeat(100_000), 'xy'.repeat(100_000), chinese.repeat(2_000)];
    for (const run of runs) {
      let bySlices = 0;
      for (let at = 0; at < run.length; at += 128) bySlices += countTokens(run.slice(at, at + 128));
      expect(await countTexts([run])).toBe(bySlices);
      // A cut adds a few tokens at most: a shorter run, which the BPE can still take whole, shows how many.
      const short = run.slice(0, 640);
      const exact = countTokens(short);
      const counted = await countTexts([short]);
      expect(counted).toBeGreaterThanOrEqual(exact);
      expect(counted - exact).toBeLessThanOrEqual(4 * 4);
    }
    // Text around a long run is counted as it is.
    const prose = paragraph('around').trim();
    expect(await countTexts([`${prose}${' '.repeat(1000)}${prose}`])).toBe(countTokens(prose) + (await countTexts([' '.repeat(1000)])) + countTokens(prose));
  });
});
