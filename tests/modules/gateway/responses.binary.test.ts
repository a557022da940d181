/**
 * A Codex-style session against two `dist/cpd` replicas on one PostgreSQL: the client is set up
 * exactly as the README says (its ```toml codex and ```sh codex blocks: Codex's model provider, the
 * openai SDK's OPENAI_BASE_URL/OPENAI_API_KEY). Turn 1 (a function call) runs on replica A, turn 2
 * continues it with previous_response_id on replica B, turn 3 on A again; the upstream receives the
 * whole conversation each time, the stored responses read back on either replica, and the wallet
 * is billed exactly. The HTTP contract of GET/DELETE /v1/responses/{id} on the binary.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import OpenAI from 'openai';
import { MICROS_PER_TOKEN, startWalletBed, type WalletBed } from '../../support/wallet-binary';
import { README_SITE, readmeBlock, readmeEnv } from '../../support/readme';

const shell = { type: 'function' as const, name: 'shell', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } } }, strict: false };

let bed: WalletBed;
beforeAll(async () => {
  bed = await startWalletBed({ replicas: 2 });
  // A tool call until the conversation holds the tool's output; then reasoning and an answer.
  bed.up.set((body) =>
    body.messages.some((m: { role: string }) => m.role === 'tool') ? { reasoning: 'files listed', content: 'There is a.txt' } : { toolCalls: [{ id: 'call_ls', name: 'shell', arguments: '{"command":["ls"]}' }] },
  );
}, 120_000);
afterAll(() => bed?.close());

describe('Responses on two replicas, as Codex uses them', () => {
  test("the README's Codex provider and SDK variables: a session chained across replicas, billed exactly", async () => {
    const [a, b] = bed.nodes as [(typeof bed.nodes)[number], (typeof bed.nodes)[number]];
    const { userId, keyId, key } = await bed.fundedKey(10_000_000n);

    // Codex's provider, as the README configures it: base_url (this site), wire_api, the key from env_key.
    const codex = Bun.TOML.parse(await readmeBlock('toml codex')) as { model: string; model_provider: string; model_providers: Record<string, { base_url: string; env_key: string; wire_api: string }> };
    const provider = codex.model_providers[codex.model_provider]!;
    expect(provider.wire_api).toBe('responses');
    const env = await readmeEnv('sh codex', a.url, key);
    expect(env[provider.env_key]).toBe(key);
    const onA = new OpenAI({ baseURL: provider.base_url.replace(README_SITE, a.url), apiKey: env[provider.env_key], maxRetries: 0 });
    // The openai SDK from OPENAI_BASE_URL and OPENAI_API_KEY alone, pointed at replica B.
    const sdkEnv = await readmeEnv('sh codex', b.url, key);
    const saved = { base: process.env.OPENAI_BASE_URL, key: process.env.OPENAI_API_KEY };
    Object.assign(process.env, { OPENAI_BASE_URL: sdkEnv.OPENAI_BASE_URL, OPENAI_API_KEY: sdkEnv.OPENAI_API_KEY });
    const onB = new OpenAI({ maxRetries: 0 });
    process.env.OPENAI_BASE_URL = saved.base;
    process.env.OPENAI_API_KEY = saved.key;
    if (saved.base === undefined) delete process.env.OPENAI_BASE_URL;
    if (saved.key === undefined) delete process.env.OPENAI_API_KEY;
    const model = 'm1';

    // Turn 1 on A: Codex streams; the model asks for a tool.
    const turn1 = await onA.responses.stream({ model, instructions: 'You are a coding agent.', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'list the files' }] }], tools: [shell], parallel_tool_calls: false, reasoning: { effort: 'medium', summary: 'auto' } }).finalResponse();
    expect(turn1.output).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_ls', name: 'shell', arguments: '{"command":["ls"]}' })]);

    // Turn 2 on B: the tool's output, continuing turn 1.
    const summaries: string[] = [];
    const stream2 = onB.responses.stream({ model, instructions: 'You are a coding agent.', previous_response_id: turn1.id, input: [{ type: 'function_call_output', call_id: 'call_ls', output: 'a.txt' }], tools: [shell] });
    stream2.on('response.reasoning_summary_text.delta', (e) => summaries.push(e.delta));
    const turn2 = await stream2.finalResponse();
    expect(summaries.join('')).toBe('files listed');
    expect(turn2.output_text).toBe('There is a.txt');
    const conversation = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: [{ type: 'text', text: 'list the files' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_ls', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } }] },
      { role: 'tool', tool_call_id: 'call_ls', content: 'a.txt' },
    ];
    const chats = () => bed.up.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body!);
    expect(chats().at(-1)!.messages).toEqual(conversation);
    expect(chats()[0]!.reasoning_effort).toBe('medium');

    // Turn 3 on A (JSON), continuing B's response.
    const turn3 = await onA.responses.create({ model, previous_response_id: turn2.id, input: 'thanks' });
    expect(chats().at(-1)!.messages).toEqual([...conversation.slice(1), { role: 'assistant', content: 'There is a.txt' }, { role: 'user', content: 'thanks' }]);

    // Each replica reads what the other stored.
    // (Items compared by identity and text: the stream helper adds parsed fields to what it assembled.)
    const items = (r: OpenAI.Responses.Response) => ({ ids: r.output.map((o) => `${o.type}:${o.id}`), text: r.output_text, status: r.status, usage: r.usage });
    expect(items(await onB.responses.retrieve(turn1.id))).toEqual(items(turn1));
    expect(items(await onA.responses.retrieve(turn2.id))).toEqual(items(turn2));
    expect((await onB.responses.retrieve(turn3.id)).previous_response_id).toBe(turn2.id);

    // Billed exactly: 10 prompt tokens each; 1 completion token for the call, 2 + 3 for reasoning and text.
    const expected = BigInt(11 + 15 + 15) * MICROS_PER_TOKEN;
    expect(await bed.spentBy(keyId)).toBe(expected);
    expect(await bed.balanceOf(userId)).toBe(10_000_000n - expected);
    for (const [turn, tokens] of [[turn1, 11], [turn2, 15], [turn3, 15]] as const) expect(turn.usage).toMatchObject({ total_tokens: tokens, cost: tokens / 1000 });
    await bed.expectBooksBalanced();

    // Deleted on B: gone on A too, and no longer continued.
    await onB.responses.delete(turn3.id);
    const gone = await fetch(`${a.url}/v1/responses/${turn3.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual({ error: expect.stringContaining(turn3.id) });
  }, 60_000);

  test('the HTTP contract: 404 for a foreign or unknown id, 400 for a malformed one, 401 without a key; all {error}; nothing billed', async () => {
    const [a, b] = bed.nodes as [(typeof bed.nodes)[number], (typeof bed.nodes)[number]];
    const owner = await bed.fundedKey(1_000_000n);
    const stranger = await bed.fundedKey(1_000_000n);
    const post = (node: typeof a, key: string, body: unknown) =>
      fetch(`${node.url}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const created = (await (await post(a, owner.key, { model: 'm1', input: 'hi' })).json()) as { id: string };
    const cases: Array<[string, Promise<Response>, number]> = [
      ['foreign GET', fetch(`${b.url}/v1/responses/${created.id}`, { headers: { authorization: `Bearer ${stranger.key}` } }), 404],
      ['foreign DELETE', fetch(`${b.url}/v1/responses/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${stranger.key}` } }), 404],
      ['foreign previous_response_id', post(b, stranger.key, { model: 'm1', input: 'x', previous_response_id: created.id }), 404],
      ['unknown GET', fetch(`${a.url}/v1/responses/resp_nothing`, { headers: { authorization: `Bearer ${owner.key}` } }), 404],
      ['id too long', fetch(`${a.url}/v1/responses/${'r'.repeat(201)}`, { headers: { authorization: `Bearer ${owner.key}` } }), 400],
      ['no key', fetch(`${a.url}/v1/responses/${created.id}`), 401],
      ['hosted tool', post(a, owner.key, { model: 'm1', input: 'x', tools: [{ type: 'web_search' }] }), 400],
    ];
    for (const [what, res, status] of cases) {
      const r = await res;
      expect([what, r.status]).toEqual([what, status]);
      expect([what, typeof ((await r.json()) as { error: unknown }).error]).toEqual([what, 'string']);
    }
    expect(await bed.spentBy(stranger.keyId)).toBe(0n);
    expect(await bed.balanceOf(stranger.userId)).toBe(1_000_000n);
    await bed.expectBooksBalanced();
  }, 60_000);
});
