/**
 * Prompt counting along a conversation: a chat or an agent sends all its earlier messages again
 * with every turn, and a stream at a per-token price counts its prompt for the provisional X-Cost
 * (or any request, when the upstream reports no usage). Each turn of TURNS is counted twice, in
 * one run: from scratch (gpt-tokenizer on every message, the baseline) and by cpd's counter
 * (`countPromptTokens`, which keeps the counts of recent long texts). Each round is a conversation
 * of its own (new texts), so the cache starts cold for it. Reports the milliseconds for the whole
 * conversation and for its last turn, and the ratio.
 *
 *   bun bench/token-count.ts        (TURNS=20 CHARS=2500 ROUNDS=5)
 */
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countPromptTokens, loadTokenizer } from '../src/modules/metering/metering.tokens';

const TURNS = Number(process.env.TURNS ?? 20);
const CHARS = Number(process.env.CHARS ?? 2500);
const ROUNDS = Number(process.env.ROUNDS ?? 5);

type Message = { role: string; content: string };
const sentence = 'The engineers measure how many tokens each turn of the conversation costs, and why. ';
const text = (tag: string) => `${tag}: ${sentence.repeat(Math.ceil(CHARS / sentence.length))}`.slice(0, CHARS);

/** The prompts of a conversation's turns: a system message, then a question and an answer per turn. */
function conversation(round: number): Message[][] {
  const messages: Message[] = [{ role: 'system', content: text(`system ${round}`) }];
  const prompts: Message[][] = [];
  for (let turn = 0; turn < TURNS; turn++) {
    messages.push({ role: 'user', content: text(`round ${round} question ${turn}`) });
    prompts.push([...messages]);
    messages.push({ role: 'assistant', content: text(`round ${round} answer ${turn}`) });
  }
  return prompts;
}

const fromScratch = (messages: Message[]) => 3 + messages.reduce((n, m) => n + 3 + countTokens(m.content), 0);

async function time(prompts: Message[][], count: (m: Message[]) => number | Promise<number>) {
  let last = 0;
  const started = performance.now();
  for (const messages of prompts) {
    const t = performance.now();
    await count(messages);
    last = performance.now() - t;
  }
  return { all: performance.now() - started, last };
}

await loadTokenizer();
fromScratch(conversation(-1)[0]!);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = { scratch: [] as number[], cached: [] as number[], scratchLast: [] as number[], cachedLast: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  const prompts = conversation(round);
  const scratch = await time(prompts, fromScratch);
  const cached = await time(prompts, (messages) => countPromptTokens({ messages }));
  if ((await countPromptTokens({ messages: prompts.at(-1)! })) !== fromScratch(prompts.at(-1)!)) throw new Error('counts differ');
  rows.scratch.push(scratch.all);
  rows.cached.push(cached.all);
  rows.scratchLast.push(scratch.last);
  rows.cachedLast.push(cached.last);
}
const kb = (JSON.stringify(conversation(0).at(-1)).length / 1024).toFixed(0);
console.log(`prompt counting, ${TURNS} turns of ${CHARS} characters a message (${kb} KB at the last turn), medians of ${ROUNDS} rounds`);
console.log(`  whole conversation: from scratch ${median(rows.scratch).toFixed(1)} ms, cpd ${median(rows.cached).toFixed(1)} ms (×${(median(rows.cached) / median(rows.scratch)).toFixed(2)})`);
console.log(`  last turn:          from scratch ${median(rows.scratchLast).toFixed(2)} ms, cpd ${median(rows.cachedLast).toFixed(2)} ms (×${(median(rows.cachedLast) / median(rows.scratchLast)).toFixed(2)})`);
