/**
 * Organizations on the compiled binary, two replicas on one PostgreSQL, a fake upstream and an
 * SMTP sink: a three-person organization built through mailed invitations, an org key each, a
 * top-up by the owner (sandbox checkout), a member's cap (402 past it), a member removed while
 * one of their streams is running (their key refused at once on the other replica), and the
 * organization's ledger and reports (usage, CSV, cost by member, transactions) agreeing with what
 * was served. Then the refusals: members see no billing (403), strangers nothing (404), the last
 * owner cannot leave (409), bad input is 400, never 500.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import OpenAI from 'openai';
import { TEST_SECRET } from '../support/app';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream';
import { type SmtpServer, startSmtp } from '../support/smtp';
import { waitFor } from '../support/wait';

const MODEL = 'm1';
/** Per request, so each admitted request costs exactly this and a cap is reached exactly. */
const PRICE = 0.002;
const CHAT = { model: MODEL, messages: [{ role: 'user' as const, content: 'hi' }] };

interface Person {
  email: string;
  token: string;
  id: string;
  key: string;
}

describe('organizations on the binary, two replicas', () => {
  let db: TestDatabase;
  let up: FakeUpstream;
  let smtp: SmtpServer;
  let a: RunningBinary;
  let b: RunningBinary;
  let orgId = '';
  const people: Record<'owner' | 'admin' | 'member' | 'stranger', Person> = {} as never;
  /** Successful chat requests by person, as the reports must show them. */
  const served: Record<string, number> = { owner: 0, admin: 0, member: 0 };

  const call = async (on: RunningBinary, method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${on.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: res.status, body: json, text };
  };
  const client = (on: RunningBinary, key: string) => new OpenAI({ apiKey: key, baseURL: `${on.url}/v1`, maxRetries: 0 });
  const chat = async (on: RunningBinary, who: 'owner' | 'admin' | 'member') => {
    const done = await client(on, people[who].key).chat.completions.create(CHAT);
    served[who]!++;
    return done;
  };
  const statusOf = async (p: Promise<unknown>) => {
    try {
      await p;
      return 200;
    } catch (err) {
      return (err as { status?: number }).status ?? 0;
    }
  };

  beforeAll(async () => {
    await ensureBuilt();
    [db, up, smtp] = await Promise.all([createTestDatabase('postgres'), startFakeUpstream({ models: [MODEL] }), startSmtp()]);
    const env = {
      DATABASE_URL: db.url!,
      SECRET_KEY: TEST_SECRET,
      MODEL_BACKENDS: `${MODEL}=${up.url}`,
      SMTP_URL: smtp.url,
      MAIL_FROM: 'cpd <noreply@mail.example>',
      PAYMENT_MODE: 'sandbox',
      RATE_LIMITS: 'register=1000/1m,login=1000/1m',
    };
    [a, b] = await Promise.all([startBinary({ env }), startBinary({ env })]);

    const cwd = mkdtempSync(join(tmpdir(), 'cpd-admin-'));
    const create = Bun.spawn([await ensureBuilt(), 'users', 'create', '--email', 'admin@platform.example', '--password', 'admin password 123', '--admin'], {
      cwd,
      env: { ...baseEnv(), ...env, DATA_DIR: join(cwd, 'data') },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [code, err] = await Promise.all([create.exited, new Response(create.stderr).text()]);
    rmSync(cwd, { recursive: true, force: true });
    if (code !== 0) throw new Error(`cpd users create failed: ${err}`);
    const admin = await call(a, 'POST', '/api/auth/login', undefined, { identifier: 'admin@platform.example', password: 'admin password 123' });
    expect((await call(a, 'PUT', '/api/admin/billing/pricing/models', admin.body.token, { models: [{ slug: MODEL, unit: 'per_request', price: PRICE }] })).status).toBe(200);

    for (const who of ['owner', 'admin', 'member', 'stranger'] as const) {
      const email = `${who}@org.example`;
      expect((await call(a, 'POST', '/api/auth/register', undefined, { email, password: `${who} password 123` })).status).toBe(201);
      const login = await call(a, 'POST', '/api/auth/login', undefined, { identifier: email, password: `${who} password 123` });
      people[who] = { email, token: login.body.token, id: login.body.user.id, key: '' };
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await Promise.all([up?.close(), smtp?.close()]);
    await db?.drop();
  });

  test('a three-person organization through mailed invitations', async () => {
    const created = await call(a, 'POST', '/api/orgs', people.owner.token, { name: 'Acme' });
    expect(created.status).toBe(201);
    orgId = created.body.id;
    for (const who of ['admin', 'member'] as const) {
      const invite = await call(a, 'POST', `/api/orgs/${orgId}/invites`, people.owner.token, { email: people[who].email, role: who });
      expect(invite.status).toBe(201);
      // Mailed, so not answered.
      expect(invite.body.link).toBeUndefined();
      const mail = await smtp.next((m) => m.to === people[who].email && m.subject.startsWith('You are invited'), `the invitation to ${who}`);
      expect(mail.subject).toBe('You are invited to join Acme on cpd International');
      const token = /invite\?token=([\w-]+)/.exec(mail.text)![1]!;
      const joined = await call(b, 'POST', '/api/orgs/invites/accept', people[who].token, { token });
      expect(joined.status).toBe(200);
      expect(joined.body).toMatchObject({ id: orgId, role: who });
    }
    const members = await call(b, 'GET', `/api/orgs/${orgId}/members`, people.member.token);
    expect(members.body.members.map((m: { role: string }) => m.role)).toEqual(['owner', 'admin', 'member']);
  });

  test('org keys by each member; the org wallet pays, topped up by the owner through the sandbox', async () => {
    for (const who of ['owner', 'admin', 'member'] as const) {
      const key = await call(a, 'POST', '/api/api-keys', people[who].token, { name: `${who}'s`, org_id: orgId });
      expect(key.status).toBe(201);
      expect(key.body).toMatchObject({ org_id: orgId, created_by: people[who].id });
      people[who].key = key.body.key;
    }
    // Nothing in the wallet yet.
    expect(await statusOf(chat(a, 'owner'))).toBe(402);

    const payment = await call(a, 'POST', '/api/billing/payments', people.owner.token, { provider: 'card', amount: 1, currency: 'USD', org_id: orgId });
    expect(payment.status).toBe(201);
    const paid = await fetch(`${a.url}/api/payments/sandbox/${payment.body.id}/pay`, { method: 'POST', body: '', headers: { 'content-type': 'application/x-www-form-urlencoded' }, redirect: 'manual' });
    expect(paid.status).toBe(303);
    expect((await call(b, 'GET', `/api/billing/payments/${payment.body.id}?org_id=${orgId}`, people.owner.token)).body.status).toBe('paid');
    expect((await call(b, 'GET', `/api/billing/wallet?org_id=${orgId}`, people.admin.token)).body.balance).toBe(1);
    // The owner's own wallet is untouched.
    expect((await call(b, 'GET', '/api/billing/wallet', people.owner.token)).body.balance).toBe(0);

    await chat(a, 'owner');
    await chat(b, 'admin');
    const keys = await call(a, 'GET', `/api/api-keys?org_id=${orgId}`, people.member.token);
    expect(keys.body.map((k: { created_by: string }) => k.created_by)).toEqual([people.member.id]);
    expect((await call(a, 'GET', `/api/api-keys?org_id=${orgId}`, people.admin.token)).body).toHaveLength(3);
  });

  test("a member's cap: spend up to it across both replicas, then 402", async () => {
    const capped = await call(a, 'PATCH', `/api/orgs/${orgId}/members/${people.member.id}`, people.admin.token, { spend_limit: 5 * PRICE, spend_period: 'month' });
    expect(capped.status).toBe(200);
    // A burst over both replicas: never more than the cap (each request costs exactly its hold).
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => statusOf(chat(i % 2 ? a : b, 'member'))));
    expect(burst.every((s) => s === 200 || s === 402)).toBe(true);
    expect(burst.filter((s) => s === 200).length).toBeLessThanOrEqual(5);
    // Then one at a time up to it.
    while (served.member! < 5) await chat(served.member! % 2 ? a : b, 'member');
    const over = await call(b, 'POST', '/v1/chat/completions', people.member.key, CHAT);
    expect(over.status).toBe(402);
    expect(over.body.error.message ?? over.body.error).toContain('spend limit in this organization is reached');
    expect(await statusOf(client(a, people.member.key).chat.completions.create(CHAT))).toBe(402);
    const member = (await call(a, 'GET', `/api/orgs/${orgId}/members`, people.owner.token)).body.members.find((m: { user_id: string }) => m.user_id === people.member.id);
    expect(member).toMatchObject({ spend_limit: '0.010000', spend_period: 'month', spent: '0.010000' });
    // The others are not capped.
    await chat(b, 'owner');
    // Raised on one replica, it holds on the other at once.
    expect((await call(a, 'PATCH', `/api/orgs/${orgId}/members/${people.member.id}`, people.owner.token, { spend_limit: 1 })).status).toBe(200);
    await chat(b, 'member');
  });

  test('members see no billing; strangers see nothing; the last owner cannot leave; bad input is 400', async () => {
    for (const path of [`/api/billing/wallet?org_id=${orgId}`, `/api/billing/transactions?org_id=${orgId}`, `/api/usage?org_id=${orgId}`, `/v1/router/cost?org_id=${orgId}`, `/api/orgs/${orgId}/audit`]) {
      const res = await call(a, 'GET', path, people.member.token);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: expect.any(String) });
      expect((await call(a, 'GET', path, people.stranger.token)).status).toBe(404);
    }
    expect((await call(a, 'POST', '/api/billing/payments', people.member.token, { provider: 'card', amount: 1, currency: 'USD', org_id: orgId })).status).toBe(403);
    expect((await call(a, 'GET', `/api/orgs/${orgId}`, people.stranger.token)).status).toBe(404);
    expect((await call(a, 'POST', '/api/api-keys', people.stranger.token, { name: 'x', org_id: orgId })).status).toBe(404);
    // An org key reads none of the organization's records.
    expect((await call(a, 'GET', '/api/usage', people.member.key)).status).toBe(403);
    const leave = await call(a, 'DELETE', `/api/orgs/${orgId}/members/${people.owner.id}`, people.owner.token);
    expect(leave.status).toBe(409);
    expect(leave.body).toEqual({ error: 'an organization needs at least one owner' });
    expect((await call(a, 'DELETE', `/api/orgs/${orgId}`, people.owner.token)).status).toBe(409);
    const bad: Array<[string, string, unknown]> = [
      ['POST', '/api/orgs', { name: '' }],
      ['POST', '/api/orgs', '{"name":'],
      ['POST', `/api/orgs/${orgId}/invites`, { email: 'not-an-address', role: 'member' }],
      ['PATCH', `/api/orgs/${orgId}/members/${people.member.id}`, { spend_limit: 'lots' }],
      ['PATCH', `/api/orgs/${orgId}/members/${people.member.id}`, { spend_limit: 0.0000001 }],
      ['POST', '/api/orgs/invites/accept', { token: '' }],
      ['POST', '/api/orgs/invites/accept', { token: 'never-issued' }],
      ['GET', `/v1/router/cost?group_by=member`, undefined],
    ];
    for (const [method, path, body] of bad) {
      const res = await call(b, method, path, people.owner.token, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
  });

  test("a member removed mid-stream: the stream ends and is billed, the member's key is refused at once on the other replica", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    up.set({ hold: { afterFrames: 2, until: gate } });
    const stream = await client(b, people.member.key).chat.completions.create({ ...CHAT, stream: true, stream_options: { include_usage: true } });
    const reading = (async () => {
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      return text;
    })();
    await waitFor(() => up.stats.streamsStarted >= 1, 'the stream started upstream');
    // Removed through replica A; the answer comes once every replica dropped the member's keys.
    expect((await call(a, 'DELETE', `/api/orgs/${orgId}/members/${people.member.id}`, people.owner.token)).status).toBe(204);
    up.set({ hold: null });
    expect(await statusOf(client(b, people.member.key).chat.completions.create(CHAT))).toBe(401);
    expect(await statusOf(client(a, people.member.key).chat.completions.create(CHAT))).toBe(401);
    release();
    expect(await reading).toBe('Hello from the fake upstream.');
    served.member!++;
    expect((await call(b, 'GET', `/api/orgs/${orgId}`, people.member.token)).status).toBe(404);
    // The others' keys still work.
    await chat(b, 'admin');
  });

  test('the ledger equals the balance, and every report agrees with what was served', async () => {
    const total = served.owner! + served.admin! + served.member!;
    const [row] = await db.database.query<{ balance: string; ledger: string; usage: string }>(
      sql`select (select balance_micros::text from wallets where user_id = ${orgId}) as balance,
                 (select sum(amount_micros)::text from wallet_transactions where user_id = ${orgId}) as ledger,
                 (select count(*)::text from wallet_transactions where user_id = ${orgId} and type = 'usage') as usage`,
    );
    expect(row!.balance).toBe(row!.ledger);
    expect(BigInt(row!.balance)).toBe(1_000_000n - BigInt(Math.round(total * PRICE * 1e6)));
    expect(Number(row!.usage)).toBe(total);

    const usage = await call(a, 'GET', `/api/usage?org_id=${orgId}&limit=200`, people.owner.token);
    expect(usage.status).toBe(200);
    const billed = usage.body.usage.filter((u: { cost: number }) => u.cost > 0);
    expect(billed).toHaveLength(total);
    expect(new Set(billed.map((u: { key_name: string }) => u.key_name))).toEqual(new Set(["owner's", "admin's", "member's"]));

    const csv = await fetch(`${b.url}/api/usage/export.csv?org_id=${orgId}`, { headers: { authorization: `Bearer ${people.admin.token}` } });
    expect(csv.status).toBe(200);
    const lines = (await csv.text()).trim().split('\n');
    expect(lines.length - 1).toBe(usage.body.usage.length);

    const cost = await call(a, 'GET', `/v1/router/cost?org_id=${orgId}&group_by=member&currency=site`, people.owner.token);
    expect(cost.status).toBe(200);
    const byMember = Object.fromEntries(cost.body.items.map((i: { member: string; cost: number }) => [i.member, i.cost]));
    expect(byMember).toEqual({
      [people.owner.email]: Number((served.owner! * PRICE).toFixed(6)),
      [people.admin.email]: Number((served.admin! * PRICE).toFixed(6)),
      [people.member.email]: Number((served.member! * PRICE).toFixed(6)),
    });

    const transactions = await call(b, 'GET', `/api/billing/transactions?org_id=${orgId}&limit=200`, people.owner.token);
    expect(transactions.status).toBe(200);
    expect(transactions.body.transactions.filter((t: { type: string }) => t.type === 'usage')).toHaveLength(total);
    expect(transactions.body.transactions.filter((t: { type: string }) => t.type === 'topup')).toHaveLength(1);

    // Every change is in the organization's audit log, and in the platform admin's.
    const audit = await call(a, 'GET', `/api/orgs/${orgId}/audit?limit=200`, people.owner.token);
    expect(audit.body.entries.map((e: { action: string }) => e.action).reverse()).toEqual([
      'org.create',
      'org.invite',
      'org.invite.accept',
      'org.invite',
      'org.invite.accept',
      'org.key.create',
      'org.key.create',
      'org.key.create',
      'org.member.update',
      'org.member.update',
      'org.member.remove',
    ]);
  });
});
