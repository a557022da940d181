/**
 * Embeddings requests (OpenAI `POST /v1/embeddings`): what a valid body is, an upper bound of its
 * cost for admission, its token count when the upstream reports no usage, and the entry point
 * itself, on the router's metering path (admit, call, commit) like chat. There is no completion:
 * the cost is the input tokens × the model's per-million price, or its per-request price.
 */
import { AppError } from '../../platform/errors';
import { toMajor } from '../../platform/money';
import { type Chunk, type Price, costOf, countTexts } from '../metering';
import type { Admitted, ChatRequest, Metered, RequestKind, Served } from './router.types';
import { type AttemptControl, type Upstream, embedOnce } from './router.upstream';

/** OpenAI's own bound on the number of inputs in one request. */
export const MAX_EMBEDDING_INPUTS = 2048;

const isTokenArray = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0);

/** The inputs as a list: each a string or a token array (`input` may be one string, one token array, or a list of either). */
function inputsOf(input: unknown): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (isTokenArray(input)) return [input];
  return input as Array<string | number[]>;
}

export function validateEmbeddingsBody(body: unknown): asserts body is Record<string, unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new AppError('invalid', 'the request body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') throw new AppError('invalid', 'model is required (a string)');
  const input = b.input;
  if (input === undefined || input === null) throw new AppError('invalid', 'input is required (a string or an array)');
  if (typeof input !== 'string' && !Array.isArray(input)) throw new AppError('invalid', 'input must be a string or an array of strings or token arrays');
  if (input.length === 0) throw new AppError('invalid', 'input must not be empty');
  if (Array.isArray(input) && !isTokenArray(input)) {
    if (input.length > MAX_EMBEDDING_INPUTS) throw new AppError('invalid', `input has more than ${MAX_EMBEDDING_INPUTS} items`);
    input.forEach((item, i) => {
      if (typeof item === 'string' ? item === '' : !isTokenArray(item))
        throw new AppError('invalid', `input[${i}] must be a non-empty string or a non-empty array of token ids`);
    });
  }
  if (b.encoding_format !== undefined && b.encoding_format !== 'float' && b.encoding_format !== 'base64') throw new AppError('invalid', 'encoding_format must be "float" or "base64"');
  if (b.dimensions !== undefined && !(Number.isInteger(b.dimensions) && (b.dimensions as number) > 0)) throw new AppError('invalid', 'dimensions must be a positive integer');
}

/** An upper bound for admission: a text token stands for at least one UTF-8 byte; a token array is its length. */
export function estimateEmbeddingCost(price: Price, _bodyBytes: number, body: Record<string, unknown>): bigint {
  let tokens = 0;
  for (const item of inputsOf(body.input)) tokens += typeof item === 'string' ? Buffer.byteLength(item) : item.length;
  return costOf(price, tokens, 0);
}

/** Input tokens when the upstream reports none: o200k for texts (an estimate), exact for token arrays. */
export async function countEmbeddingTokens(body: Record<string, unknown>): Promise<number> {
  const inputs = inputsOf(body.input);
  const arrays = inputs.reduce((n: number, item) => n + (typeof item === 'string' ? 0 : item.length), 0);
  return arrays + (await countTexts(inputs.filter((item): item is string => typeof item === 'string')));
}

function validEmbeddingUsage(u: unknown): u is { prompt_tokens: number } {
  const x = u as { prompt_tokens?: unknown } | null;
  return !!x && Number.isInteger(x.prompt_tokens) && (x.prompt_tokens as number) >= 0;
}

interface Metering {
  admit(req: ChatRequest, kind: RequestKind): Promise<Admitted>;
  call<T>(a: Admitted, streamed: boolean, attempt: (upstream: Upstream, slug: string, control: AttemptControl) => Promise<T>): Promise<{ served: Served; result: T }>;
  commit(a: Admitted, m: Metered): Promise<void>;
}

export function createEmbeddings(metering: Metering, kind: RequestKind, firstByteTimeoutMs: number) {
  /** The upstream's embeddings answer with `model` as served and `usage` {prompt_tokens, total_tokens, cost}. */
  async function embed(req: ChatRequest): Promise<{ response: Chunk; costMicros: bigint }> {
    const a = await metering.admit(req, kind);
    const { served, result: response } = await metering.call(a, false, (upstream, slug, control) => embedOnce(upstream, JSON.stringify({ ...req.body, model: slug }), control, firstByteTimeoutMs));
    served.lease.release();
    const reported = validEmbeddingUsage(response.usage);
    const prompt = reported ? (response.usage as { prompt_tokens: number }).prompt_tokens : await countEmbeddingTokens(req.body);
    const costMicros = costOf(served.candidate.price, prompt, 0);
    await metering.commit(a, { model: served.candidate.slug, backend: served.lease.backend.url, counts: { prompt, completion: 0, cached: 0, reasoning: 0, counted: !reported }, costMicros, status: 200, streamed: false, aborted: false, clamped: false });
    response.model = served.candidate.slug;
    response.usage = { prompt_tokens: prompt, total_tokens: prompt, cost: toMajor(costMicros) };
    return { response, costMicros };
  }
  return { embed };
}
