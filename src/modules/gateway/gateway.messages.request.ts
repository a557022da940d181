/**
 * Anthropic Messages API request → chat completions request. Every Messages request has one: a
 * chat backend serves it, and for an anthropic-format backend (which gets the body as sent) it is
 * what admission reads (prompt and completion bounds, the key's models). Thinking blocks a client
 * sends back have no place in chat (DeepSeek refuses reasoning in its input): they are left out of
 * the translation, never refused, and passed through untouched to anthropic-format backends.
 *
 * For a pass-through the translation is `lenient`: what chat cannot express (server tools,
 * documents, blocks newer than this code) is the anthropic backend's to judge, so a block is kept
 * as its JSON text (which the prompt bound counts) and a tool or tool_choice without a chat form is
 * left out, instead of refusing the request.
 */
import { AppError } from '../../platform/errors';

type Json = Record<string, unknown>;

const invalid = (message: string) => new AppError('invalid', message);
const isObject = (v: unknown): v is Json => !!v && typeof v === 'object' && !Array.isArray(v);
const MAX_COUNT = 2_147_483_647;

/** An image block → a chat image part (base64 as a data URL). */
function imagePart(block: Json, where: string): Json {
  const source = block.source;
  if (!isObject(source)) throw invalid(`${where}.source must be an object`);
  if (source.type === 'base64') {
    if (typeof source.media_type !== 'string' || typeof source.data !== 'string') throw invalid(`${where}.source needs media_type and data (strings)`);
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  }
  if (source.type === 'url' && typeof source.url === 'string') return { type: 'image_url', image_url: { url: source.url } };
  throw invalid(`${where}.source.type must be base64 or url`);
}

function textOf(block: Json, where: string): string {
  if (typeof block.text !== 'string') throw invalid(`${where}.text must be a string`);
  return block.text;
}

/** A tool_result's content: a string, or text and image blocks (chat tool messages take text only: images are said as such). */
function toolResultText(content: unknown, where: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of blocks`);
  return content
    .map((b, i) => {
      if (!isObject(b)) throw invalid(`${where}.content[${i}] must be an object`);
      if (b.type === 'text') return textOf(b, `${where}.content[${i}]`);
      if (b.type === 'image') return '[image]';
      throw invalid(`${where}.content[${i}].type must be text or image`);
    })
    .join('');
}

/** Blocks that carry no meaning for a chat backend and are left out of the translation. */
const LEFT_OUT = new Set(['thinking', 'redacted_thinking']);

/** A block a lenient translation keeps as text: its JSON. */
const asText = (block: unknown): Json => ({ type: 'text', text: JSON.stringify(block) });

/** One user message → chat messages: its tool results first (each a `tool` message, as chat wants them right after the calls), then its text and images. */
function userMessages(content: unknown, where: string, lenient: boolean): Json[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of content blocks`);
  const tools: Json[] = [];
  const parts: Json[] = [];
  const convert = (block: unknown, at: string) => {
    if (!isObject(block)) throw invalid(`${at} must be an object`);
    switch (block.type) {
      case 'text':
        parts.push({ type: 'text', text: textOf(block, at) });
        return;
      case 'image':
        parts.push(imagePart(block, at));
        return;
      case 'tool_result': {
        if (typeof block.tool_use_id !== 'string') throw invalid(`${at}.tool_use_id must be a string`);
        const text = toolResultText(block.content, at);
        tools.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${text}` : text });
        return;
      }
      default:
        if (LEFT_OUT.has(block.type as string)) return;
        throw invalid(`${at}.type ${JSON.stringify(block.type)} is not supported by this model's backend (text, image, tool_result)`);
    }
  };
  content.forEach((block, i) => {
    try {
      convert(block, `${where}.content[${i}]`);
    } catch (err) {
      if (!lenient) throw err;
      parts.push(asText(block));
    }
  });
  return parts.length ? [...tools, { role: 'user', content: parts }] : tools;
}

function assistantMessage(content: unknown, where: string, lenient: boolean): Json | null {
  if (typeof content === 'string') return { role: 'assistant', content };
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of content blocks`);
  let text = '';
  const calls: Json[] = [];
  const convert = (block: unknown, at: string) => {
    if (!isObject(block)) throw invalid(`${at} must be an object`);
    if (block.type === 'text') text += textOf(block, at);
    else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalid(`${at}: a tool_use needs id and name (strings)`);
      calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    } else if (!LEFT_OUT.has(block.type as string)) throw invalid(`${at}.type ${JSON.stringify(block.type)} is not supported in an assistant message (text, tool_use, thinking)`);
  };
  content.forEach((block, i) => {
    try {
      convert(block, `${where}.content[${i}]`);
    } catch (err) {
      if (!lenient) throw err;
      text += JSON.stringify(block);
    }
  });
  if (!text && !calls.length) return null;
  return { role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls } : {}) };
}

function systemText(system: unknown): string | null {
  if (system === undefined || system === null) return null;
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) throw invalid('system must be a string or an array of text blocks');
  return system
    .map((b, i) => {
      if (!isObject(b) || b.type !== 'text') throw invalid(`system[${i}] must be a text block`);
      return textOf(b, `system[${i}]`);
    })
    .join('\n');
}

function toolOf(t: unknown, i: number): Json {
  if (!isObject(t)) throw invalid(`tools[${i}] must be an object`);
  if (t.type !== undefined && t.type !== null && t.type !== 'custom') throw invalid(`tools[${i}]: server tools (${String(t.type)}) are not supported by this model's backend; only custom tools`);
  if (typeof t.name !== 'string' || t.name === '') throw invalid(`tools[${i}].name must be a non-empty string`);
  if (!isObject(t.input_schema)) throw invalid(`tools[${i}].input_schema must be an object`);
  return { type: 'function', function: { name: t.name, ...(typeof t.description === 'string' ? { description: t.description } : {}), parameters: t.input_schema } };
}

function toolsOf(tools: unknown, lenient: boolean): Json[] | undefined {
  if (tools === undefined) return undefined;
  if (!Array.isArray(tools)) throw invalid('tools must be an array');
  if (!lenient) return tools.map(toolOf);
  return tools.flatMap((t, i) => {
    try {
      return [toolOf(t, i)];
    } catch {
      return [];
    }
  });
}

function toolChoiceOf(choice: unknown): { tool_choice?: unknown; parallel_tool_calls?: boolean } {
  if (choice === undefined || choice === null) return {};
  if (!isObject(choice)) throw invalid('tool_choice must be an object');
  const parallel = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (choice.type) {
    case 'auto':
      return { tool_choice: 'auto', ...parallel };
    case 'any':
      return { tool_choice: 'required', ...parallel };
    case 'none':
      return { tool_choice: 'none' };
    case 'tool':
      if (typeof choice.name !== 'string') throw invalid('tool_choice.name must be a string');
      return { tool_choice: { type: 'function', function: { name: choice.name } }, ...parallel };
    default:
      throw invalid('tool_choice.type must be auto, any, tool or none');
  }
}

const optionalNumber = (body: Json, name: string) => {
  const v = body[name];
  if (v !== undefined && v !== null && typeof v !== 'number') throw invalid(`${name} must be a number`);
  return v ?? undefined;
};

/** Checks what every Messages body needs: model, messages, and for a completion max_tokens. */
function checkBody(body: Json, countOnly: boolean) {
  if (typeof body.model !== 'string' || body.model === '') throw invalid('model: Field required (a string)');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalid('messages: Field required (a non-empty array)');
  if (countOnly) return;
  const max = body.max_tokens;
  if (!(typeof max === 'number' && Number.isInteger(max) && max >= 1 && max <= MAX_COUNT)) throw invalid('max_tokens: Field required (a positive integer)');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw invalid('stream must be a boolean');
  const stops = body.stop_sequences;
  if (stops !== undefined && !(Array.isArray(stops) && stops.every((s) => typeof s === 'string'))) throw invalid('stop_sequences must be an array of strings');
  const thinking = body.thinking;
  if (thinking !== undefined && !(isObject(thinking) && typeof thinking.type === 'string')) throw invalid('thinking must be an object with a type');
}

/**
 * The chat completions body for a Messages body; throws AppError('invalid') for what is malformed or
 * (unless `lenient`) has no chat equivalent. `countOnly`: a count_tokens body (no max_tokens).
 */
export function chatBodyOfMessages(body: Json, opts: { countOnly?: boolean; lenient?: boolean } = {}): Json {
  const lenient = opts.lenient === true;
  checkBody(body, opts.countOnly === true);
  const messages: Json[] = [];
  const system = systemText(body.system);
  if (system !== null) messages.push({ role: 'system', content: system });
  (body.messages as unknown[]).forEach((m, i) => {
    const where = `messages[${i}]`;
    if (!isObject(m)) throw invalid(`${where} must be an object`);
    if (m.role === 'user') messages.push(...userMessages(m.content, where, lenient));
    else if (m.role === 'assistant') {
      const message = assistantMessage(m.content, where, lenient);
      if (message) messages.push(message);
    } else throw invalid(`${where}.role must be user or assistant`);
  });
  const stops = body.stop_sequences as string[] | undefined;
  const metadata = isObject(body.metadata) ? body.metadata : {};
  const chat: Json = {
    model: body.model,
    messages,
    tools: toolsOf(body.tools, lenient),
    ...(lenient ? {} : toolChoiceOf(body.tool_choice)),
    max_tokens: body.max_tokens,
    stop: stops?.length ? stops : undefined,
    temperature: optionalNumber(body, 'temperature'),
    top_p: optionalNumber(body, 'top_p'),
    stream: body.stream,
    user: typeof metadata.user_id === 'string' ? metadata.user_id : undefined,
  };
  // Undefined fields are left out, so the upstream sees only what the caller set.
  for (const k of Object.keys(chat)) if (chat[k] === undefined) delete chat[k];
  return chat;
}
