/**
 * The OpenAPI request bodies of the /v1 routes. Those routes read the raw body themselves (the
 * upstream gets it as sent), so these schemas only describe it for /api/docs; they validate nothing,
 * and say so (`x-cpd-validated: false`): the handler checks the body and words its own errors.
 */
const json = (schema: Record<string, unknown>, example: Record<string, unknown>) => ({
  required: true,
  'x-cpd-validated': false,
  content: { 'application/json': { schema, example } },
});

const message = {
  type: 'object',
  required: ['role', 'content'],
  properties: { role: { type: 'string', enum: ['system', 'user', 'assistant', 'tool'] }, content: { description: 'text, or an array of content parts' } },
};

export const chatBody = json(
  {
    type: 'object',
    required: ['model', 'messages'],
    properties: {
      model: { type: 'string', description: 'a priced model slug or a route (GET /v1/models)' },
      messages: { type: 'array', items: message },
      stream: { type: 'boolean', description: 'Server-Sent Events; the last chunk carries usage and cost' },
      max_tokens: { type: 'integer', minimum: 1 },
      temperature: { type: 'number' },
      tools: { type: 'array', items: { type: 'object' } },
    },
  },
  { model: 'llama-3.1-8b', messages: [{ role: 'user', content: 'Hello' }] },
);

export const embeddingsBody = json(
  {
    type: 'object',
    required: ['model', 'input'],
    properties: {
      model: { type: 'string' },
      input: { description: 'a string, a token array, or up to 2048 of either' },
    },
  },
  { model: 'embed-small', input: ['first text', 'second text'] },
);

export const responsesBody = json(
  {
    type: 'object',
    required: ['model', 'input'],
    properties: {
      model: { type: 'string' },
      input: { description: 'a string or an array of input items' },
      instructions: { type: 'string' },
      tools: { type: 'array', items: { type: 'object' }, description: 'function tools' },
      stream: { type: 'boolean' },
      store: { type: 'boolean', description: 'keep the response 30 days (default true)' },
      previous_response_id: { type: 'string', description: 'continue a stored response of yours' },
      reasoning: { type: 'object', description: '{effort} → reasoning_effort' },
      max_output_tokens: { type: 'integer', minimum: 1 },
    },
  },
  { model: 'llama-3.1-8b', instructions: 'Be brief.', input: 'Hello' },
);

export const replayBody = json(
  {
    type: 'object',
    required: ['capture_id'],
    properties: { capture_id: { type: 'string' }, model: { type: 'string', description: 'another model to send it to' } },
  },
  { capture_id: 'cap_…' },
);

const anthropicMessages = {
  type: 'array',
  items: {
    type: 'object',
    required: ['role', 'content'],
    properties: {
      role: { type: 'string', enum: ['user', 'assistant'] },
      content: { description: 'text, or an array of blocks: text, image, tool_use, tool_result, thinking (sent back with its signature)' },
    },
  },
};

export const messagesBody = json(
  {
    type: 'object',
    required: ['model', 'max_tokens', 'messages'],
    properties: {
      model: { type: 'string', description: 'a priced model slug or a route (an operator may name a route after a Claude model)' },
      max_tokens: { type: 'integer', minimum: 1 },
      messages: anthropicMessages,
      system: { description: 'a string or an array of text blocks' },
      stop_sequences: { type: 'array', items: { type: 'string' } },
      tools: { type: 'array', items: { type: 'object' }, description: 'custom tools: {name, description, input_schema}' },
      thinking: { type: 'object', description: '{type: "enabled", budget_tokens}' },
      stream: { type: 'boolean', description: "Server-Sent Events in Anthropic's event order; message_delta's usage carries the cost" },
    },
  },
  { model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [{ role: 'user', content: 'Hello' }] },
);

export const countTokensBody = json(
  {
    type: 'object',
    required: ['model', 'messages'],
    properties: { model: { type: 'string' }, messages: anthropicMessages, system: { description: 'a string or an array of text blocks' }, tools: { type: 'array', items: { type: 'object' } } },
  },
  { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'Hello' }] },
);
