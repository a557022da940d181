/**
 * What users do on the replica bed (tests/support/replicas.ts), with the client-side books the
 * invariants are checked against: sign-up with a sandbox top-up (its notification replayed to
 * every replica), gateway calls JSON and streamed, agent conversations (turns billed through the
 * router), and model downloads (a ZIP streamed from the shared S3 store, a single file as an
 * authenticated 302 to a presigned URL).
 *
 * A request counts as answered only when the client got the whole answer: a 200 JSON body, a
 * stream up to its usage chunk, an agent turn up to `turn.completed` without an `error` frame.
 * checkInvariants() then asserts, on the database, after the replicas drained (SIGTERM):
 * every wallet's balance equals the sum of its ledger; one usage row per answered gateway request
 * and per answered agent turn; every user charged exactly what those answers cost; one download
 * record per download started; no 5xx outside a declared outage, and only 503 during one.
 */
import { expect } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sql } from 'drizzle-orm';
import { createParser } from 'eventsource-parser';
import { signSandboxNotification } from '../../src/modules/billing/providers/sandbox';
import { TEST_SECRET } from './app';
import type { FakeBehaviour } from './fake-upstream';
import type { ReplicaBed } from './replicas';
import { waitFor } from './wait';

export const TOPUP = 5;
export const micros = (major: number | string) => Math.round(Number(major) * 1_000_000);

export const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

export interface User {
  email: string;
  token: string;
  keys: Array<{ id: string; key: string }>;
  /** What the user's answered gateway requests cost, in micro-units, as the responses said. */
  chargedMicros: number;
  answered: number;
  /** Agent turns answered, and what they cost at the price in force (turns do not report a cost). */
  turns: number;
  turnMicros: number;
  /** The sign-up's top-up. */
  paymentId: string;
}

/** The bundles published to the shared store: a directory (ZIP download) and a single file (302). */
export interface Published {
  zip: { slug: string; weight: Uint8Array };
  file: { slug: string; bytes: Uint8Array };
}

export function replicaScenario(bed: ReplicaBed, model: string) {
  const users: User[] = [];
  let price = 0;
  let downloadsStarted = 0;
  /** Upstream behaviour for calls without tools (content, delays); tool calls follow the weather script. */
  let plain: Partial<FakeBehaviour> = {};
  bed.up.set((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'tool') return { ...plain, content: 'It is sunny in Paris.' };
    if (body.tools) return { ...plain, toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' }] };
    return plain;
  });

  const s = {
    users,
    get price() {
      return price;
    },
    upstream(b: Partial<FakeBehaviour>) {
      plain = { ...plain, ...b };
    },

    /** Sets the per-request price through the proxy (the replicas hear it by NOTIFY). */
    async setPrice(next: number) {
      expect(
        (
          await bed.call(bed.lb.url, 'PUT', '/api/admin/billing/pricing/models', bed.adminToken, {
            models: [{ slug: model, unit: 'per_request', price: next }],
          })
        ).status,
      ).toBe(200);
      price = next;
    },

    /** Waits until `base` prices a request at the current price (each probe is an answered, billed request). */
    async seesPrice(base: string, user: User, timeoutMs: number) {
      const want = price.toFixed(6);
      await waitFor(async () => (await s.chatJson(base, user)).headers.get('x-cost') === want, `X-Cost ${want} on ${base}`, { timeoutMs });
    },

    /** Register, log in, two API keys, a sandbox top-up whose notification reaches every live replica (credited once). */
    async signUp(i: number): Promise<User> {
      const email = `user${i}@example.com`;
      const password = `replica password ${i}`;
      expect((await bed.call(bed.lb.url, 'POST', '/api/auth/register', undefined, { email, password })).status).toBe(201);
      const login = await bed.call(bed.lb.url, 'POST', '/api/auth/login', undefined, { identifier: email, password });
      expect(login.status).toBe(200);
      const user: User = {
        email,
        token: login.body.token,
        keys: [],
        chargedMicros: 0,
        answered: 0,
        turns: 0,
        turnMicros: 0,
        paymentId: '',
      };
      for (const name of ['first', 'second']) {
        const key = await bed.call(bed.lb.url, 'POST', '/api/api-keys', user.token, { name });
        expect(key.status).toBe(201);
        user.keys.push({ id: key.body.id, key: key.body.key });
      }
      users.push(user);
      const payment = await bed.call(bed.lb.url, 'POST', '/api/billing/payments', user.token, {
        provider: 'card',
        amount: TOPUP,
        currency: 'USD',
      });
      expect(payment.status).toBe(201);
      user.paymentId = payment.body.id;
      const note = signSandboxNotification(TEST_SECRET, {
        payment_id: payment.body.id,
        status: 'paid',
        amount: TOPUP.toFixed(2),
        currency: 'USD',
      });
      const replays = await Promise.all(
        bed
          .alive()
          .map((r) =>
            bed.recordingFetch(`${r.url}/api/payments/webhooks/card`, { method: 'POST', body: note.body, headers: note.headers }),
          ),
      );
      expect(replays.map((r) => r.status)).toEqual(bed.alive().map(() => 200));
      expect((await bed.call(bed.lb.url, 'GET', '/api/billing/wallet', user.token)).body).toMatchObject({
        balance: TOPUP,
        currency: 'USD',
      });
      return user;
    },

    /** A JSON chat call; counted as answered (with its X-Cost) only when it is. */
    async chatJson(base: string, user: User, key = user.keys.at(-1)!.key) {
      const res = await bed.call(base, 'POST', '/v1/chat/completions', key, { model, messages: [{ role: 'user', content: 'hi' }] });
      if (res.status === 200) {
        user.answered++;
        user.chargedMicros += micros(res.headers.get('x-cost')!);
      }
      return res;
    },

    /** A streamed chat call with the openai client; answered when its usage chunk arrived. Throws what the client threw. */
    async chatStream(base: string, user: User) {
      let cost: number | null = null;
      for await (const chunk of await bed
        .openai(base, user.keys.at(-1)!.key)
        .chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })) {
        const usage = (chunk as { usage?: { cost?: number } | null }).usage;
        if (usage?.cost !== undefined) cost = usage.cost;
      }
      if (cost !== null) {
        user.answered++;
        user.chargedMicros += micros(cost);
      }
      return cost;
    },

    /** Creates an agent with the weather tool and a session, each through the proxy (so on different replicas). */
    async newSession(user: User, tools = true) {
      const key = user.keys.at(-1)!.key;
      const agent = await bed.call(bed.lb.url, 'POST', '/v1/agents', key, {
        model,
        instructions: 'You report the weather.',
        ...(tools ? { tools: [WEATHER_TOOL] } : {}),
      });
      expect(agent.status).toBe(201);
      const session = await bed.call(bed.lb.url, 'POST', '/v1/agents/sessions', key, { agent_id: agent.body.id });
      expect(session.status).toBe(201);
      return session.body.id as string;
    },

    /**
     * Posts an event to …/events/stream on `base` and reads the frames. `onFirstFrame` runs once
     * the first frame is in (the turn is in flight). A turn is answered (and counted, at the
     * current price) when `turn.completed` arrives with no `error` frame before it.
     */
    async streamTurn(base: string, user: User, sessionId: string, event: unknown, onFirstFrame?: () => void) {
      const res = await bed.recordingFetch(`${base}/v1/agents/sessions/${sessionId}/events/stream`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user.keys.at(-1)!.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(event),
      });
      const frames: Array<{ event: string; data: any }> = [];
      if (res.status !== 200)
        return { status: res.status, frames, broken: false, answered: false, body: await res.json().catch(() => null) };
      const parser = createParser({ onEvent: (e) => frames.push({ event: e.event ?? 'message', data: JSON.parse(e.data) }) });
      const decoder = new TextDecoder();
      let broken = false;
      try {
        for await (const chunk of res.body!) {
          parser.feed(decoder.decode(chunk, { stream: true }));
          if (frames.length > 0 && onFirstFrame) {
            onFirstFrame();
            onFirstFrame = undefined;
          }
        }
      } catch {
        broken = true; // the connection broke: this client's stream failed
      }
      const answered = frames.at(-1)?.event === 'turn.completed' && !frames.some((f) => f.event === 'error');
      if (answered) {
        user.turns++;
        user.turnMicros += micros(price);
      }
      return { status: res.status, frames, broken, answered, body: null };
    },

    /**
     * A whole weather conversation spread over the replicas: the question streamed on `bases[0]`
     * (a tool call), the tool's answer streamed on `bases[1]` (the sentence), a follow-up posted
     * in the background on `bases[2]` and its outcome read through the proxy.
     */
    async conversation(user: User, bases: string[]) {
      const sessionId = await s.newSession(user);
      const first = await s.streamTurn(bases[0]!, user, sessionId, { role: 'user', content: 'Weather in Paris?' });
      expect(first.frames.map((f) => f.event)).toEqual(['tool_calls', 'turn.completed']);
      const second = await s.streamTurn(bases[1]!, user, sessionId, {
        role: 'tool',
        tool_call_results: [{ call_id: 'call_w1', output: '{"temp":21}' }],
      });
      expect(second.answered).toBe(true);
      expect(
        second.frames
          .filter((f) => f.event === 'delta')
          .map((f) => f.data.content)
          .join(''),
      ).toBe('It is sunny in Paris.');
      const posted = await bed.call(bases[2]!, 'POST', `/v1/agents/sessions/${sessionId}/events`, user.keys.at(-1)!.key, {
        role: 'user',
        content: 'And tomorrow?',
      });
      expect(posted.status).toBe(201);
      const settled = await waitFor(
        async () => (await bed.call(bed.lb.url, 'GET', `/v1/agents/sessions/${sessionId}`, user.keys.at(-1)!.key)).body,
        'the background turn',
        { until: (b) => b?.status !== 'in_progress' },
      );
      // The third turn saw the whole history, wherever its parts were stored: it called the tool again.
      expect(settled).toMatchObject({ status: 'requires_action', error: null });
      user.turns++;
      user.turnMicros += micros(price);
      return sessionId;
    },

    /** Publishes a directory bundle and a single file to the shared store with `cpd models publish`. */
    async publish(): Promise<Published> {
      const dir = mkdtempSync(join(tmpdir(), 'cpd-replicas-bundle-'));
      try {
        const weight = crypto.getRandomValues(new Uint8Array(300_000));
        const bytes = crypto.getRandomValues(new Uint8Array(120_000));
        const files: Record<string, string | Uint8Array> = {
          'bundle/config.json': '{"format":"aria-quant-bundle","format_version":2}',
          'bundle/weight.bin': weight,
          'bundle/tokenizer/tokenizer.json': '{"version":"1.0"}',
          'single.bin': bytes,
        };
        for (const [path, content] of Object.entries(files)) {
          mkdirSync(dirname(join(dir, path)), { recursive: true });
          writeFileSync(join(dir, path), content);
        }
        await bed.cli(['models', 'publish', join(dir, 'bundle'), '--slug', 'bundle', '--quant', 'int4', '--sdk', 'v1.0']);
        await bed.cli(['models', 'publish', join(dir, 'single.bin'), '--slug', 'single', '--quant', 'int8', '--sdk', 'v1.0']);
        return { zip: { slug: 'bundle', weight }, file: { slug: 'single', bytes } };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },

    /**
     * Downloads the ZIP on `base` and checks it: its size, and the weights inside byte for byte
     * (unzip). `refused` lists the statuses accepted instead (503 while the database is away); the status is returned.
     */
    async downloadZip(base: string, user: User, published: Published, refused: number[] = []) {
      const res = await bed.recordingFetch(`${base}/api/models/${published.zip.slug}/download?quant=int4&sdk=v1.0`, {
        headers: { authorization: `Bearer ${user.token}` },
      });
      if (refused.includes(res.status)) return res.status;
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/zip');
      downloadsStarted++;
      const zip = new Uint8Array(await res.arrayBuffer());
      expect(String(zip.length)).toBe(res.headers.get('x-linked-size')!);
      const dir = mkdtempSync(join(tmpdir(), 'cpd-replicas-zip-'));
      try {
        writeFileSync(join(dir, 'b.zip'), zip);
        const r = Bun.spawnSync(['unzip', '-p', join(dir, 'b.zip'), 'weight.bin'], { stdout: 'pipe', stderr: 'pipe' });
        expect(r.exitCode).toBe(0);
        expect(Buffer.compare(r.stdout, Buffer.from(published.zip.weight))).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      return res.status;
    },

    /** The single file with an API key on `base`: a 302 to a presigned URL of the shared store, which serves the bytes. */
    async downloadFile(base: string, user: User, published: Published, refused: number[] = []) {
      const res = await bed.call(base, 'GET', `/api/models/${published.file.slug}/download?quant=int8&sdk=v1.0`, user.keys.at(-1)!.key);
      if (refused.includes(res.status)) return res.status;
      expect(res.status).toBe(302);
      downloadsStarted++;
      const location = res.headers.get('location')!;
      expect(location).toStartWith(bed.s3Endpoint);
      const object = await fetch(location);
      expect(object.status).toBe(200);
      expect(Buffer.compare(Buffer.from(await object.arrayBuffer()), Buffer.from(published.file.bytes))).toBe(0);
      return res.status;
    },

    usageRows: async () => (await bed.database.query<{ n: number }>(sql`select count(*)::int as n from router_usage`))[0]!.n,
    answeredTotal: () => users.reduce((sum, u) => sum + u.answered + u.turns, 0),
    downloadRows: async () => (await bed.database.query<{ n: number }>(sql`select count(*)::int as n from downloads`))[0]!.n,
    get downloadsStarted() {
      return downloadsStarted;
    },

    /** Drains the live replicas with SIGTERM, then asserts the books (see the file's header). */
    async checkInvariants() {
      const alive = bed.alive();
      expect(await Promise.all(alive.map((r) => r.stop()))).toEqual(alive.map(() => 0));

      const wallets = await bed.database.query<{ user_id: string; balance: string; ledger: string }>(sql`
        select w.user_id, w.balance_micros::text as balance, coalesce(sum(t.amount_micros), 0)::text as ledger
        from wallets w left join wallet_transactions t on t.user_id = w.user_id group by w.user_id, w.balance_micros`);
      expect(wallets.length).toBeGreaterThanOrEqual(users.length);
      for (const w of wallets) expect(w.ledger).toBe(w.balance);

      const rows = await bed.database.query<{ email: string; gateway: number; turns: number; balance: string }>(sql`
        select u.email, w.balance_micros::text as balance,
          (select count(*)::int from router_usage r where r.user_id = u.id and coalesce(r.request_id, '') not like 'turn\\_%') as gateway,
          (select count(*)::int from router_usage r where r.user_id = u.id and r.request_id like 'turn\\_%') as turns
        from users u join wallets w on w.user_id = u.id`);
      expect(await s.usageRows()).toBe(s.answeredTotal());
      for (const user of users) {
        const expected = { email: user.email, gateway: user.answered, turns: user.turns, balance: String(micros(TOPUP) - user.chargedMicros - user.turnMicros) };
        const found = rows.find((r) => r.email === user.email);
        // A balance off by a price step was seen once under load: show the entries and their usage rows to tell which.
        if (found?.balance !== expected.balance)
          console.error(
            `${user.email}: balance ${found?.balance}, expected ${expected.balance}; the ledger and usage rows:\n${JSON.stringify(
              await bed.database.query(sql`
                select t.amount_micros::text as amount, t.reference, r.request_id, r.entrypoint, r.created_at
                from wallet_transactions t join users u on u.id = t.user_id left join router_usage r on t.reference = 'usage:' || r.id
                where u.email = ${user.email} order by t.created_at`),
              null,
              1,
            )}`,
          );
        expect(found).toEqual(expected);
      }
      expect(await s.downloadRows()).toBe(downloadsStarted);
      expect(bed.unexpected5xx()).toEqual([]);
      // While a replica or the database was away: 503 only (never a 500 or a proxy error).
      expect(bed.statuses.filter((x) => x.status >= 500 && x.status !== 503)).toEqual([]);
    },
  };
  return s;
}
