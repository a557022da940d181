/**
 * The no-500 fuzz against dist/cpd as a process: the same seeded case generators as the
 * in-process run (tests/support/fuzz-cases.ts), fewer cases per caller (the binary run is about
 * what differs between the two: build flags, Bun.serve's own routing and HEAD, real sockets),
 * with another seed so the two runs together cover more inputs.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createServer } from 'node:net';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { BOGUS_TOKENS, type Caller, checkResponse, describeBody, fuzzRoutes, headersOf, inputsFor, labelOf, plausibleValues } from '../support/fuzz-cases';

const SEED = 20261123;
const CASES_PER_CALLER = 8;
const REQUEST_TIMEOUT_MS = 10_000;
const USER = { email: 'fuzz-user@example.com', password: 'correct horse battery' };
const ADMIN = { email: 'fuzz-admin@example.com', password: 'correct horse battery' };

let db: TestDatabase;
let cpd: RunningBinary;
let apiKey: string;
const realIds: string[] = [];
const plausible = plausibleValues();

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function json(method: string, path: string, body?: unknown, token?: string) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(cpd.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  expect(res.status, `${method} ${path}: ${text}`).toBeLessThan(300);
  return JSON.parse(text);
}

const headerBytes = (headers: Record<string, string>) => Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);

const login = async (who: typeof USER) => (await json('POST', '/api/auth/login', { identifier: who.email, password: who.password })).token as string;

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const env = {
    DATABASE_URL: db.url!,
    SECRET_KEY: 'f'.repeat(40),
    GITHUB_API_URL: dead,
    RELEASE_MIRROR_URL: dead,
    // Two logins per route: the fuzz is about answers, not throttling (429 would pass it anyway).
    RATE_LIMITS: 'login=100000/1m,register=100000/1m,twofa=100000/1m',
  };
  cpd = await startBinary({ env });
  for (const [who, admin] of [
    [USER, false],
    [ADMIN, true],
  ] as const) {
    const created = Bun.spawnSync([await ensureBuilt(), 'users', 'create', '--email', who.email, '--password', who.password, ...(admin ? ['--admin'] : [])], {
      env: { ...baseEnv(), ...env },
    });
    expect(created.exitCode, created.stderr.toString()).toBe(0);
    realIds.push(JSON.parse(created.stdout.toString()).id);
  }
  const token = await login(USER);
  const key = await json('POST', '/api/api-keys', { name: 'fuzz' }, token);
  apiKey = key.key;
  const agent = await json('POST', '/v1/agents', { model: 'test-model', name: 'fuzz' }, apiKey);
  const session = await json('POST', '/v1/agents/sessions', { agent_id: agent.id }, apiKey);
  const payment = await json('POST', '/api/billing/payments', { provider: 'card', amount: 10, currency: 'USD' }, token);
  realIds.push(key.id, agent.id, session.id, payment.id, 'card', 'pay', 'fail');
  plausible.agent_id = [agent.id];
  plausible.payment_id = [payment.id];
}, 120_000);

afterAll(async () => {
  expect(await cpd?.stop()).toBe(0);
  await db?.drop();
});

test('no route of dist/cpd answers hostile input with a 5xx or a non-{error} body', async () => {
  const doc = await json('GET', '/api/docs/json');
  // HEAD too: Bun.serve answers it from the GET route, which only the binary shows.
  const routes = fuzzRoutes(doc, ['PATCH', 'OPTIONS', 'PUT', 'HEAD']);
  expect(routes.length).toBeGreaterThan(50);

  const failures: string[] = [];
  const statuses: Record<number, number> = {};
  let requests = 0;
  for (const [routeIndex, route] of routes.entries()) {
    // Fresh sessions per route: logout, 2FA and session routes may legitimately end the previous ones.
    const tokens: Record<Caller, string | undefined> = {
      none: undefined,
      bogus: BOGUS_TOKENS[routeIndex % BOGUS_TOKENS.length],
      session: await login(USER),
      key: apiKey,
      admin: await login(ADMIN),
    };
    for (const [callerIndex, caller] of (['none', 'bogus', 'session', 'key', 'admin'] as const).entries()) {
      const inputs = inputsFor(route, SEED + routeIndex * 5 + callerIndex, { realIds, plausible, count: CASES_PER_CALLER });
      for (const input of inputs.slice(0, route.undeclared ? 2 : undefined)) {
        const url = input.query ? `${input.path}?${input.query}` : input.path;
        const label = labelOf(route, caller, input);
        requests++;
        let res: Response;
        let text: string;
        try {
          res = await fetch(cpd.url + url, {
            method: route.method,
            headers: headersOf(input, tokens[caller]),
            body: input.body,
            redirect: 'manual',
            signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          });
          text = await res.text();
        } catch (err) {
          failures.push(`${label}\n    -> ${(err as Error).message}`);
          continue;
        }
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        // A request line plus headers over Bun's limit (16 KiB) is refused by its HTTP parser with a
        // bare 431, before any of our code runs: a 4xx, never a 500, but no place to put {error}.
        if (res.status === 431 && text === '' && url.length + headerBytes(headersOf(input, tokens[caller])) > 8 * 1024) continue;
        const problem = checkResponse(route, input, res, text);
        if (problem) failures.push(`${label}\n    -> ${res.status} ${problem}: ${describeBody(text)}`);
      }
    }
  }
  console.log(`no-500 binary sweep: ${routes.length} routes, ${requests} requests, ${failures.length} failures; statuses ${JSON.stringify(statuses)}`);
  expect(failures, `\n${failures.join('\n')}`).toEqual([]);
  expect(cpd.logs()).not.toContain('"msg":"unhandled error"');
}, 300_000);
