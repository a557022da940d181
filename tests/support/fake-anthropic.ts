/**
 * A local Anthropic Messages API server for tests (an outside party, speaking its real protocol).
 * It listens on 127.0.0.1 port 0; its `url` is the base URL that `/v1/messages` follows, as
 * ANTHROPIC_BASE_URL is.
 *
 *   GET  /v1/models                  {data: [{type: 'model', id, display_name, created_at}], has_more, first_id, last_id}
 *   POST /v1/messages                JSON message, or SSE when `stream: true`, event for event as Anthropic
 *                                    documents it: message_start (usage with cache fields), ping, per block
 *                                    content_block_start / *_delta / content_block_stop (thinking with its
 *                                    signature_delta, text, tool_use with input_json_delta), message_delta
 *                                    (stop_reason and cumulative usage), message_stop
 *
 * Like Anthropic it wants `x-api-key` (when `apiKey` is given) and `anthropic-version`; refuses an
 * `anthropic-beta` flag it does not know (400) and a thinking budget not below `max_tokens`; and
 * checks thinking blocks sent back: each must
 * carry the signature it issued for that text, and with thinking enabled an assistant turn that
 * ends in tool_use must start with its thinking block (400 otherwise, as Anthropic answers).
 *
 * Usage:
 *   const fa = await startFakeAnthropic({ apiKey: 'sk-ant-x' });
 *   fa.set({ thinking: 'let me see', toolUse: { name: 'weather', input: { city: 'Paris' } } });
 *   fa.set({ text: 'Sunny.', usage: { input_tokens: 20, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000 } });
 *   fa.set({ cutAfterEvents: 5 });   // the connection closes after 5 events
 *   fa.set({ errorAfterEvents: 5 }); // an `error` event (overloaded_error) after 5 events, then the end
 *   fa.requests.at(-1)               // method, path, headers, body as received (and the raw body text)
 */
import { createHash } from 'node:crypto';

export interface FakeAnthropicBehaviour {
  /** Thinking text (its pieces are output tokens); answered only when the request enables thinking. */
  thinking: string;
  text: string;
  toolUse: { id?: string; name: string; input: Record<string, unknown> } | null;
  /** Input usage: input_tokens excludes the cache reads and writes, reported apart. */
  usage: { input_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
  /** output_tokens reported; null: the pieces of thinking and text plus 1 per tool call. */
  outputTokens: number | null;
  /** Answer this status with an Anthropic error body instead (default null). */
  status: number | null;
  cutAfterEvents: number | null;
  errorAfterEvents: number | null;
}

export interface FakeAnthropicRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Record<string, any> | null;
  raw: string;
}

export const FAKE_ANTHROPIC_DEFAULTS: FakeAnthropicBehaviour = {
  thinking: '',
  text: 'Hello from the fake Anthropic.',
  toolUse: null,
  usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  outputTokens: null,
  status: null,
  cutAfterEvents: null,
  errorAfterEvents: null,
};

const KNOWN_BETAS = new Set(['interleaved-thinking-2025-05-14', 'prompt-caching-2024-07-31', 'fine-grained-tool-streaming-2025-05-14']);

/** The signature this server gives a thinking text: what it expects back with that text. */
export const signatureOf = (thinking: string) => createHash('sha256').update(`fake-anthropic:${thinking}`).digest('base64');

const pieces = (text: string) => text.match(/\S+\s*/g) ?? [];

const ERROR_TYPE: Record<number, string> = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error', 429: 'rate_limit_error', 529: 'overloaded_error' };
const errorBody = (status: number, message: string) => Response.json({ type: 'error', error: { type: ERROR_TYPE[status] ?? 'api_error', message } }, { status });

/** The first problem Anthropic would find with the thinking blocks sent back, or null. */
function thinkingProblem(body: Record<string, any>): string | null {
  const enabled = body.thinking?.type === 'enabled';
  for (const [i, m] of (body.messages ?? []).entries()) {
    if (m?.role !== 'assistant' || !Array.isArray(m.content)) continue;
    for (const block of m.content)
      if (block?.type === 'thinking' && block.signature !== signatureOf(String(block.thinking))) return `messages.${i}.content: Invalid \`signature\` in \`thinking\` block`;
    const usesTool = m.content.some((b: any) => b?.type === 'tool_use');
    if (enabled && usesTool && m.content[0]?.type !== 'thinking' && m.content[0]?.type !== 'redacted_thinking')
      return `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${m.content[0]?.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`;
  }
  return null;
}

export interface FakeAnthropic {
  url: string;
  set(b: Partial<FakeAnthropicBehaviour> | ((body: Record<string, any>) => Partial<FakeAnthropicBehaviour>)): void;
  reset(): void;
  requests: FakeAnthropicRequest[];
  close(): Promise<void>;
}

export async function startFakeAnthropic(opts: { apiKey?: string; models?: string[] } = {}): Promise<FakeAnthropic> {
  type Source = Partial<FakeAnthropicBehaviour> | ((body: Record<string, any>) => Partial<FakeAnthropicBehaviour>);
  let source: Source = {};
  let seq = 0;
  const requests: FakeAnthropicRequest[] = [];

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      const raw = req.method === 'POST' ? await req.text() : '';
      let body: Record<string, any> | null = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {}
      requests.push({ method: req.method, path, headers: Object.fromEntries(req.headers), body, raw });
      if (opts.apiKey !== undefined && req.headers.get('x-api-key') !== opts.apiKey) return errorBody(401, 'invalid x-api-key');
      if (!req.headers.get('anthropic-version')) return errorBody(400, 'anthropic-version: header is required');
      const betas = (req.headers.get('anthropic-beta') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      const unknown = betas.filter((b) => !KNOWN_BETAS.has(b));
      if (unknown.length) return errorBody(400, `Unexpected value(s) \`${unknown.join(', ')}\` for the \`anthropic-beta\` header.`);
      if (req.method === 'GET' && path === '/v1/models') {
        const data = (opts.models ?? ['claude-fake']).map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' }));
        return Response.json({ data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
      }
      if (req.method !== 'POST' || path !== '/v1/messages') return errorBody(404, 'not found');
      if (!body || typeof body.model !== 'string' || !Number.isInteger(body.max_tokens) || !Array.isArray(body.messages)) return errorBody(400, 'model, max_tokens and messages are required');
      if (body.thinking?.type === 'enabled' && !(body.thinking.budget_tokens < body.max_tokens)) return errorBody(400, '`max_tokens` must be greater than `thinking.budget_tokens`');
      const problem = thinkingProblem(body);
      if (problem) return errorBody(400, problem);
      const b: FakeAnthropicBehaviour = { ...FAKE_ANTHROPIC_DEFAULTS, ...(typeof source === 'function' ? source(body) : source) };
      if (b.status !== null) return errorBody(b.status, `fake anthropic status ${b.status}`);
      const n = ++seq;
      return body.stream === true ? stream(body, b, n) : Response.json(messageOf(body, b, n));
    },
  });

  function blocksOf(body: Record<string, any>, b: FakeAnthropicBehaviour, n: number) {
    const blocks: Array<Record<string, any>> = [];
    if (body.thinking?.type === 'enabled' && b.thinking) blocks.push({ type: 'thinking', thinking: b.thinking, signature: signatureOf(b.thinking) });
    if (b.text) blocks.push({ type: 'text', text: b.text });
    if (b.toolUse) blocks.push({ type: 'tool_use', id: b.toolUse.id ?? `toolu_fake_${n}`, name: b.toolUse.name, input: b.toolUse.input });
    return blocks;
  }

  function outputOf(blocks: Array<Record<string, any>>, b: FakeAnthropicBehaviour) {
    if (b.outputTokens !== null) return b.outputTokens;
    return blocks.reduce((sum, bl) => sum + (bl.type === 'thinking' ? pieces(bl.thinking).length : bl.type === 'text' ? pieces(bl.text).length : 1), 0);
  }

  function messageOf(body: Record<string, any>, b: FakeAnthropicBehaviour, n: number) {
    const content = blocksOf(body, b, n);
    return {
      id: `msg_fake_${n}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content,
      stop_reason: b.toolUse ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { ...b.usage, output_tokens: outputOf(content, b) },
    };
  }

  function eventsOf(body: Record<string, any>, b: FakeAnthropicBehaviour, n: number): Array<[string, Record<string, any>]> {
    const content = blocksOf(body, b, n);
    const output = outputOf(content, b);
    const events: Array<[string, Record<string, any>]> = [
      ['message_start', { type: 'message_start', message: { id: `msg_fake_${n}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...b.usage, output_tokens: 1 } } }],
      ['ping', { type: 'ping' }],
    ];
    content.forEach((block, index) => {
      if (block.type === 'thinking') {
        events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }]);
        for (const p of pieces(block.thinking)) events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: p } }]);
        events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } }]);
      } else if (block.type === 'text') {
        events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }]);
        for (const p of pieces(block.text)) events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: p } }]);
      } else {
        events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }]);
        const json = JSON.stringify(block.input);
        const half = Math.floor(json.length / 2);
        for (const part of [json.slice(0, half), json.slice(half)]) events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } }]);
      }
      events.push(['content_block_stop', { type: 'content_block_stop', index }]);
    });
    // message_delta's usage is cumulative: the whole message's totals so far.
    events.push(['message_delta', { type: 'message_delta', delta: { stop_reason: b.toolUse ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { ...b.usage, output_tokens: output } }]);
    events.push(['message_stop', { type: 'message_stop' }]);
    return events;
  }

  function stream(body: Record<string, any>, b: FakeAnthropicBehaviour, n: number): Response {
    const events = eventsOf(body, b, n);
    const enc = new TextEncoder();
    let i = 0;
    const frame = (name: string, data: unknown) => enc.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    const out = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (b.errorAfterEvents !== null && i === b.errorAfterEvents) {
          controller.enqueue(frame('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
          controller.close();
          return;
        }
        if ((b.cutAfterEvents !== null && i === b.cutAfterEvents) || i >= events.length) {
          controller.close();
          return;
        }
        const [name, data] = events[i++]!;
        controller.enqueue(frame(name, data));
      },
    });
    return new Response(out, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } });
  }

  return {
    url: `http://127.0.0.1:${server.port}`,
    set(b) {
      source = typeof b === 'function' || typeof source === 'function' ? b : { ...source, ...b };
    },
    reset() {
      source = {};
      requests.length = 0;
    },
    requests,
    close: () => server.stop(true),
  };
}
