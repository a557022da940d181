/**
 * OpenAI Responses request → chat completions request, so every backend that speaks chat serves
 * the Responses API too. A continued conversation (`previous_response_id`) comes first as items
 * the caller reads from the stored responses. What has no chat equivalent is refused rather than
 * silently ignored: hosted tools (web search, file search, …; function and custom tools map to
 * chat functions), `item_reference`, file inputs.
 */
import { AppError } from '../../platform/errors';

type Json = Record<string, unknown>;

const invalid = (message: string) => new AppError('invalid', message);
const isObject = (v: unknown): v is Json => !!v && typeof v === 'object' && !Array.isArray(v);

const ROLES = new Set(['user', 'assistant', 'system', 'developer']);

/** A Responses content part → a chat content part. */
function partOf(part: unknown, where: string): Json {
  if (!isObject(part)) throw invalid(`${where} must be an object`);
  switch (part.type) {
    case 'input_text':
    case 'output_text':
      if (typeof part.text !== 'string') throw invalid(`${where}.text must be a string`);
      return { type: 'text', text: part.text };
    case 'refusal':
      return { type: 'text', text: typeof part.refusal === 'string' ? part.refusal : '' };
    case 'input_image': {
      if (typeof part.image_url !== 'string') throw invalid(`${where}.image_url must be a string (file_id images need stored files, which this gateway does not keep)`);
      return { type: 'image_url', image_url: { url: part.image_url, ...(typeof part.detail === 'string' ? { detail: part.detail } : {}) } };
    }
    default:
      throw invalid(`${where}.type ${JSON.stringify(part.type)} is not a supported content part (input_text, output_text, refusal, input_image)`);
  }
}

function contentOf(content: unknown, where: string): string | Json[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(`${where}.content must be a string or an array of content parts`);
  return content.map((p, i) => partOf(p, `${where}.content[${i}]`));
}

/** Text of a function_call_output's output: a string, or the text of its parts. */
function outputText(output: unknown, where: string): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return output.map((p, i) => (isObject(p) && typeof p.text === 'string' ? p.text : JSON.stringify(partOf(p, `${where}.output[${i}]`)))).join('');
  throw invalid(`${where}.output must be a string or an array of content parts`);
}

/** Chat messages for Responses input; `history`: the items of a stored conversation (which may be none). */
function messagesOf(input: unknown, history = false): Json[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input) || (input.length === 0 && !history)) throw invalid('input is required: a string or a non-empty array of items');
  const messages: Json[] = [];
  input.forEach((item, i) => {
    const where = `input[${i}]`;
    if (!isObject(item)) throw invalid(`${where} must be an object`);
    // An item without a type is a message (the easy input form: {role, content}).
    const type = item.type ?? 'message';
    switch (type) {
      case 'message': {
        if (typeof item.role !== 'string' || !ROLES.has(item.role)) throw invalid(`${where}.role must be one of user, assistant, system, developer`);
        // Chat backends know `system`; `developer` is its newer name. An assistant's or system's
        // text parts are joined: some chat backends take only a string there.
        const content = contentOf(item.content, where);
        const role = item.role === 'developer' ? 'system' : item.role;
        const textOnly = Array.isArray(content) && role !== 'user' && content.every((p) => p.type === 'text');
        messages.push({ role, content: textOnly ? content.map((p) => p.text).join('') : content });
        return;
      }
      case 'function_call':
      case 'custom_tool_call': {
        const custom = type === 'custom_tool_call';
        const args = custom ? item.input : item.arguments;
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof args !== 'string')
          throw invalid(`${where}: a ${type} needs call_id, name and ${custom ? 'input' : 'arguments'} (strings)`);
        const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: custom ? JSON.stringify({ input: args }) : args } };
        // Consecutive calls are one assistant turn with several tool calls, as chat expects.
        const last = messages.at(-1);
        if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) (last.tool_calls as Json[]).push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
        return;
      }
      case 'function_call_output':
      case 'custom_tool_call_output': {
        if (typeof item.call_id !== 'string') throw invalid(`${where}.call_id must be a string`);
        messages.push({ role: 'tool', tool_call_id: item.call_id, content: outputText(item.output, where) });
        return;
      }
      case 'reasoning':
        // A previous answer's reasoning, sent back by clients that replay output: chat has no place for it.
        return;
      case 'item_reference':
        throw invalid(`${where}: item_reference is not supported: send the item itself, or continue a stored response with previous_response_id`);
      default:
        throw invalid(`${where}.type ${JSON.stringify(type)} is not a supported item type (message, function_call, function_call_output, custom_tool_call, custom_tool_call_output, reasoning)`);
    }
  });
  return messages;
}

/**
 * A custom tool (free-form input, e.g. Codex's apply_patch) becomes a function with one string
 * parameter, `input`; its grammar, if any, goes into the description for the model to follow.
 */
function customToolFunction(t: Json, where: string): Json {
  const format = isObject(t.format) ? t.format : null;
  if (format && format.type !== 'text' && !(format.type === 'grammar' && typeof format.definition === 'string'))
    throw invalid(`${where}.format must be {type: "text"} or {type: "grammar", syntax, definition}`);
  const grammar = format?.type === 'grammar' ? `\n\nThe input must follow this ${String(format.syntax ?? '')} grammar:\n${format.definition}` : '';
  const description = `${typeof t.description === 'string' ? t.description : ''}${grammar}`;
  return {
    name: t.name,
    ...(description ? { description } : {}),
    parameters: { type: 'object', properties: { input: { type: 'string', description: 'the raw input' } }, required: ['input'], additionalProperties: false },
  };
}

/** Chat tools for Responses tools; `custom` collects the names of custom tools, whose calls are answered as custom_tool_call items. */
function toolsOf(tools: unknown, custom: Set<string>): Json[] | undefined {
  if (tools === undefined) return undefined;
  if (!Array.isArray(tools)) throw invalid('tools must be an array');
  return tools.map((t, i) => {
    if (!isObject(t)) throw invalid(`tools[${i}] must be an object`);
    if (t.type !== 'function' && t.type !== 'custom')
      throw invalid(`tools[${i}]: type ${JSON.stringify(t.type)} is a hosted tool this gateway cannot run; only function and custom tools are supported`);
    if (typeof t.name !== 'string' || t.name === '') throw invalid(`tools[${i}].name must be a non-empty string`);
    if (t.type === 'custom') {
      custom.add(t.name);
      return { type: 'function', function: customToolFunction(t, `tools[${i}]`) };
    }
    const fn: Json = { name: t.name };
    if (t.description !== undefined) fn.description = t.description;
    if (t.parameters !== undefined) fn.parameters = t.parameters;
    if (t.strict !== undefined && t.strict !== null) fn.strict = t.strict;
    return { type: 'function', function: fn };
  });
}

function toolChoiceOf(choice: unknown): unknown {
  if (choice === undefined || choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isObject(choice) && (choice.type === 'function' || choice.type === 'custom') && typeof choice.name === 'string') return { type: 'function', function: { name: choice.name } };
  throw invalid('tool_choice must be "auto", "none", "required" or {type: "function" or "custom", name}');
}

function responseFormatOf(text: unknown): Json | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) throw invalid('text must be an object');
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isObject(format)) throw invalid('text.format must be an object');
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'json_schema') {
    if (typeof format.name !== 'string' || !isObject(format.schema)) throw invalid('text.format json_schema needs name and schema');
    const extra = { ...(typeof format.description === 'string' ? { description: format.description } : {}), ...(typeof format.strict === 'boolean' ? { strict: format.strict } : {}) };
    return { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, ...extra } };
  }
  throw invalid('text.format.type must be text, json_object or json_schema');
}

const optionalNumber = (body: Json, name: string) => {
  const v = body[name];
  if (v !== undefined && v !== null && typeof v !== 'number') throw invalid(`${name} must be a number`);
  return v ?? undefined;
};

const EFFORTS = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']);

/** reasoning.effort → chat's reasoning_effort; `summary` has no chat equivalent (reasoning, when sent, is always summarised). */
function reasoningEffortOf(reasoning: unknown): string | undefined {
  if (reasoning === undefined || reasoning === null) return undefined;
  if (!isObject(reasoning)) throw invalid('reasoning must be an object');
  const effort = reasoning.effort;
  if (effort === undefined || effort === null) return undefined;
  if (typeof effort !== 'string' || !EFFORTS.has(effort)) throw invalid(`reasoning.effort must be one of ${[...EFFORTS].join(', ')}`);
  return effort;
}

/** A Responses request, checked: what the gateway needs before it asks for a chat completion. */
export interface ResponsesRequest {
  /** The response this one continues, or null. */
  previousResponseId: string | null;
  /** Keep the response (OpenAI's default: true). */
  store: boolean;
  /** The request's own input as items (a string input is one user message). */
  input: Json[];
  /** The names of its custom tools: their calls are answered as custom_tool_call items. */
  customTools: ReadonlySet<string>;
  /** The chat completions body, given the items of the conversation it continues (oldest first). */
  chatBody(history: Json[]): Json;
}

/** Checks a Responses body; throws AppError('invalid') for what is malformed or has no chat equivalent. */
export function responsesRequestOf(body: Json): ResponsesRequest {
  if (typeof body.model !== 'string' || body.model === '') throw invalid('model is required (a string)');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw invalid('stream must be a boolean');
  if (body.store !== undefined && body.store !== null && typeof body.store !== 'boolean') throw invalid('store must be a boolean');
  // What needs server state this gateway does not keep would be lost silently if ignored.
  if (body.conversation !== undefined && body.conversation !== null) throw invalid('conversation is not supported: continue a stored response with previous_response_id');
  if (body.prompt !== undefined && body.prompt !== null) throw invalid('prompt (a stored prompt template) is not supported: send instructions and input');
  if (body.background === true) throw invalid('background is not supported: send the request with stream: true, or wait for its answer');
  const previous = body.previous_response_id;
  if (previous !== undefined && previous !== null && (typeof previous !== 'string' || previous === '' || previous.length > 200)) throw invalid('previous_response_id must be a response id');
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') throw invalid('instructions must be a string');
  const maxOutput = body.max_output_tokens;
  if (maxOutput !== undefined && maxOutput !== null && !(Number.isInteger(maxOutput) && (maxOutput as number) > 0)) throw invalid('max_output_tokens must be a positive integer');
  const own = messagesOf(body.input);
  const customTools = new Set<string>();
  const chat: Json = {
    model: body.model,
    tools: toolsOf(body.tools, customTools),
    tool_choice: toolChoiceOf(body.tool_choice),
    parallel_tool_calls: typeof body.parallel_tool_calls === 'boolean' ? body.parallel_tool_calls : undefined,
    temperature: optionalNumber(body, 'temperature'),
    top_p: optionalNumber(body, 'top_p'),
    max_tokens: maxOutput ?? undefined,
    reasoning_effort: reasoningEffortOf(body.reasoning),
    response_format: responseFormatOf(body.text),
    user: typeof body.user === 'string' ? body.user : undefined,
  };
  // Undefined fields are left out, so the upstream sees only what the caller set.
  for (const k of Object.keys(chat)) if (chat[k] === undefined) delete chat[k];
  const system = typeof body.instructions === 'string' ? [{ role: 'system', content: body.instructions }] : [];
  return {
    previousResponseId: typeof previous === 'string' ? previous : null,
    store: body.store !== false,
    customTools,
    input: typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: body.input }] }] : (body.input as Json[]),
    // A stored conversation holds only items this gateway took in or produced, so it translates.
    chatBody: (history) => {
      const messages = [...system, ...messagesOf(history, true), ...own];
      if (messages.length === 0) throw invalid('input has no message');
      return { model: chat.model, messages, ...chat };
    },
  };
}
