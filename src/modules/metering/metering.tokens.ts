/**
 * Token counting for when the upstream reports no usage (and for aborted streams, whose final
 * usage chunk never comes), and for a stream's provisional X-Cost at a per-token price. Method: the o200k_base BPE (gpt-tokenizer, the GPT-4o encoding), with
 * OpenAI's chat accounting: each message costs its text tokens plus 3, the reply is primed with
 * 3 more; tool definitions count as their JSON. Upstream models use other tokenizers, so a count
 * is an estimate within a few percent; upstream usage always wins when present.
 */
/** Counts of several texts, in their order (one message to the counter's thread for all of them). */
type Counter = (texts: string[]) => Promise<number[]>;
let counter: Promise<Counter> | null = null;

/** Texts shorter than this are counted each time: it costs less than keeping them. */
const CACHED_FROM_CHARS = 1024;
/** What the cache of counts may keep, in characters (at most 16 MB). */
const CACHED_CHARS = 8_000_000;
/** Longer texts are counted in pieces of 4-8 K characters, other counts served between them. */
const PIECE_CHARS = 4096;
/**
 * Where a text may be cut without changing its count: before a space that starts a word (after a
 * character that is not a space), or before a CJK punctuation mark between two letters (Chinese
 * has no spaces). o200k's pre-tokenizer never joins a token across these points: a word ends at
 * them, and the space or the mark opens the next token (tests/modules/metering/metering.tokens.test.ts
 * holds the pieces' sum to the whole on prose, code, JSON, Chinese and odd spacing).
 */
const CUT = /(?<=\S)(?= \p{L})|(?<=\p{L})(?=[、。，！？；：]\p{L})/u;
/**
 * The longest run of one kind of character (letters, spaces, other signs) given to the BPE in one
 * piece. The BPE's time grows with the square of a token candidate's length, and the pre-tokenizer
 * makes one candidate of a whole run: 8 000 spaces took 130 ms, 10 000 Chinese characters without
 * punctuation 1.2 s, so a body of them could hold the process for hours. Longer runs are cut every
 * MAX_RUN characters (the BPE's time per character stays flat up to there), which can add a few
 * tokens per cut to the count; ordinary text has no such run.
 */
const MAX_RUN = 128;
const LONG_RUN = new RegExp(`[\\p{L}\\p{M}]{${MAX_RUN + 1},}|\\s{${MAX_RUN + 1},}|[^\\s\\p{L}\\p{N}]{${MAX_RUN + 1},}`, 'gu');

const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;
/** `at`, moved past the second half of a surrogate pair so that no character is split. */
const atWholeCharacter = (text: string, at: number) => (at < text.length && isLowSurrogate(text.charCodeAt(at)) ? at + 1 : at);

/** Where the piece that starts at `start` ends: the first cut point past PIECE_CHARS, else (none within as much again) a forced cut. */
function pieceEnd(text: string, start: number): number {
  if (text.length - start <= 2 * PIECE_CHARS) return text.length;
  const at = text.slice(start + PIECE_CHARS, start + 2 * PIECE_CHARS).search(CUT);
  return atWholeCharacter(text, start + PIECE_CHARS + (at >= 0 ? at : PIECE_CHARS));
}

/** A piece's count, its runs longer than MAX_RUN counted MAX_RUN characters at a time. */
function countRuns(count: (text: string) => number, text: string): number {
  let total = 0;
  let from = 0;
  for (const run of text.matchAll(LONG_RUN)) {
    total += count(text.slice(from, run.index));
    for (let at = 0; at < run[0].length; ) {
      const next = atWholeCharacter(run[0], at + MAX_RUN);
      total += count(run[0].slice(at, next));
      at = next;
    }
    from = run.index + run[0].length;
  }
  return total + count(text.slice(from));
}

/**
 * A text's count, piece by piece (counting takes ~0.4 ms per 10 KB, and a body may hold megabytes:
 * GATEWAY_MAX_BODY), with other counts served between the pieces. Runs on the counter's thread
 * (metering.tokens.worker.ts).
 */
export async function countInPieces(count: (text: string) => number, text: string): Promise<number> {
  let total = 0;
  for (let start = 0; start < text.length; ) {
    const end = pieceEnd(text, start);
    total += countRuns(count, text.slice(start, end));
    start = end;
    if (start < text.length) await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}

/**
 * Where the counter's thread starts from. Run from source, the worker's file is beside this one. In
 * the compiled binary this module is bundled into a chunk at the root of the binary's own file
 * system, and the worker (a second entry point of `bun build`, see the Makefile) keeps its path
 * under src/.
 */
function workerUrl(): string {
  const here = new URL(import.meta.url);
  return new URL(here.pathname.startsWith('/$bunfs/') ? './modules/metering/metering.tokens.worker.ts' : './metering.tokens.worker.ts', here).href;
}

/** Counts on the counter's thread, started at first use and again if it ever dies. */
function countingThread(): Counter {
  let worker: Worker | null = null;
  let nextId = 0;
  const pending = new Map<number, { resolve: (counts: number[]) => void; reject: (e: Error) => void }>();
  function start(): Worker {
    const w = new Worker(workerUrl());
    // The thread never keeps the process alive.
    w.unref();
    w.onmessage = (event: MessageEvent<{ id: number; counts?: number[]; error?: string }>) => {
      const { id, counts, error } = event.data;
      const call = pending.get(id);
      pending.delete(id);
      if (error !== undefined) call?.reject(new Error(`token count failed: ${error}`));
      else call?.resolve(counts!);
    };
    w.onerror = (event) => {
      worker = null;
      const err = new Error(`token counter thread failed: ${event.message}`);
      for (const call of pending.values()) call.reject(err);
      pending.clear();
    };
    return w;
  }
  return (texts) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker ??= start();
      worker.postMessage({ id, texts });
    });
}

/**
 * The counter: the encoding's tables load on the counter's thread at first use (or preload()), not
 * at start-up; the cache's module with them. Counts of recent long texts are kept here, by the
 * text: a conversation sends all its earlier messages again with every turn, and an agent its tool
 * definitions, so each is counted once, not at every turn (a lookup hashes and compares the text).
 */
export function loadTokenizer(): Promise<Counter> {
  counter ??= import('lru-cache').then(({ LRUCache }) => {
    const recent = new LRUCache<string, number>({ maxSize: CACHED_CHARS, sizeCalculation: (_count, text) => text.length });
    const countOnThread = countingThread();
    return async (texts: string[]) => {
      const counts = texts.map((text) => (text ? (text.length >= CACHED_FROM_CHARS ? recent.get(text) : undefined) : 0));
      const missing = texts.filter((_, i) => counts[i] === undefined);
      if (missing.length) {
        const counted = await countOnThread(missing);
        let next = 0;
        texts.forEach((text, i) => {
          if (counts[i] !== undefined) return;
          counts[i] = counted[next++]!;
          if (text.length >= CACHED_FROM_CHARS) recent.set(text, counts[i]!);
        });
      }
      return counts as number[];
    };
  });
  return counter;
}

const PER_MESSAGE = 3;
const REPLY_PRIMING = 3;

/** Text of an OpenAI content field: a string, or an array of parts whose text parts count. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') out += (part as { text: string }).text;
  return out;
}

/** The sum of several texts' counts, counted together (one message to the counter's thread). */
export async function countTexts(texts: string[]): Promise<number> {
  if (!texts.some(Boolean)) return 0;
  return (await (await loadTokenizer())(texts)).reduce((a, b) => a + b, 0);
}

export async function countPromptTokens(body: Record<string, unknown>): Promise<number> {
  let n = REPLY_PRIMING;
  const texts: string[] = [];
  for (const m of (body.messages as unknown[]) ?? []) {
    if (!m || typeof m !== 'object') continue;
    const msg = m as Record<string, unknown>;
    n += PER_MESSAGE;
    texts.push(textOf(msg.content));
    if (typeof msg.name === 'string') texts.push(msg.name);
    if (Array.isArray(msg.tool_calls)) texts.push(JSON.stringify(msg.tool_calls));
  }
  if (Array.isArray(body.tools)) texts.push(JSON.stringify(body.tools));
  return n + (await countTexts(texts));
}

