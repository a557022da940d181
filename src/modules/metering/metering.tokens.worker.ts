/**
 * The token counter's own thread. Loading the o200k tables takes 0.35–0.4 s of CPU in the compiled
 * binary (measured as the longest /healthz answer right after start: 357–409 ms while the tables
 * loaded on the event loop), and counting a long prompt takes ~0.4 ms per 10 KB; here neither
 * holds up a request. Messages: {id, texts} in, {id, counts} or {id, error} out.
 */
import { countInPieces } from './metering.tokens';

declare const self: Worker;

// The handler is set before the tables finish loading, so no message is missed meanwhile.
const tokenizer = import('gpt-tokenizer/encoding/o200k_base');

self.onmessage = async (event: MessageEvent<{ id: number; texts: string[] }>) => {
  const { id, texts } = event.data;
  try {
    const { countTokens } = await tokenizer;
    const counts: number[] = [];
    for (const text of texts) counts.push(await countInPieces(countTokens, text));
    postMessage({ id, counts });
  } catch (err) {
    postMessage({ id, error: (err as Error)?.message ?? String(err) });
  }
};
