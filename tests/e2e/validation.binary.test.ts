/**
 * The validation sweep on dist/cpd: every schema constraint of every route in the binary's own
 * OpenAPI document (/api/docs/json), violated one at a time on a request that otherwise passes
 * validation, answers 400 {"error": "..."}. This is what failed on a binary built with identifier
 * minification: `GET /api/billing/transactions?limit=0` answered 200 there.
 *
 * Callers: each route is called with a fresh admin session, or else an API key of the same admin
 * when the session is refused (401/403), so auth passes and every violation must reach
 * validation: 400. Routes whose baseline is still 401/403 refuse for their own reasons after
 * validation (a login with a wrong password, a ZIP link without its signature): the summary
 * lists them, and their violations are 400 all the same, as validation comes first there.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { baselineRequest, type Hints, type Route, routesOf, type SweepRequest, violations } from '../support/openapi-cases';

const ADMIN = { email: 'sweep-admin@example.com', password: 'correct horse battery' };

let db: TestDatabase;
let cpd: RunningBinary;
let apiKey: string;

/** A schema-validation answer, as platform/http/errors.ts words it ("invalid limit: Expected …"). */
const SCHEMA_ERROR = /^invalid [^:]+: /;

async function send(req: SweepRequest, token?: string) {
  const headers: Record<string, string> = { ...req.headers };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(cpd.url + req.url, {
    method: req.method,
    headers,
    body: req.body === undefined ? undefined : JSON.stringify(req.body),
    redirect: 'manual',
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, text, body, type: res.headers.get('content-type') ?? '' };
}

async function adminSession(): Promise<string> {
  const res = await send({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/json' }, body: { identifier: ADMIN.email, password: ADMIN.password } });
  expect(res.status, res.text).toBe(200);
  return (res.body as { token: string }).token;
}

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  // Logins per route and anonymous agent calls: their limits are raised so the sweep measures validation, not throttling.
  const env = { DATABASE_URL: db.url!, SECRET_KEY: 's'.repeat(40), RATE_LIMITS: 'login=100000/1m,register=100000/1m,twofa=100000/1m,agents_anonymous=100000/1m' };
  cpd = await startBinary({ env });
  const created = Bun.spawnSync([await ensureBuilt(), 'users', 'create', '--email', ADMIN.email, '--password', ADMIN.password, '--admin'], {
    env: { ...baseEnv(), ...env },
  });
  expect(created.exitCode, created.stderr.toString()).toBe(0);
  const key = await send({ method: 'POST', url: '/api/api-keys', headers: { 'content-type': 'application/json' }, body: { name: 'sweep' } }, await adminSession());
  expect(key.status, key.text).toBe(201);
  apiKey = (key.body as { key: string }).key;
}, 120_000);

afterAll(async () => {
  expect(await cpd?.stop()).toBe(0);
  await db?.drop();
});

/** Valid values the generator cannot guess from a schema alone. */
const hints: Hints = {
  provider: ['card'],
  currency: ['USD'],
  sdk: ['v1.0'],
  quant: ['int4'],
  // An event with content passes the service's own check, so only the violated field is wrong.
  content: ['hello'],
};

test('every schema constraint of every route, violated alone, answers 400 {error} on the binary', async () => {
  const doc = (await send({ method: 'GET', url: '/api/docs/json', headers: {} })).body as Parameters<typeof routesOf>[0];
  const routes: Route[] = routesOf(doc);
  expect(routes.length).toBeGreaterThan(40);

  const failures: string[] = [];
  const refusedAfterValidation: string[] = [];
  let checked = 0;
  const byConstraint: Record<string, number> = {};
  for (const route of routes) {
    const cases = violations(route, hints);
    if (!cases.length) continue;
    const name = `${route.method} ${route.path}`;
    const baseline = baselineRequest(route, hints);
    // The caller this route accepts: a fresh admin session (logout or 2FA routes may end it), else
    // the key. Credentials are checked before validation, so violations go with an accepted one:
    // when the key is refused too, the session's 401/403 came from the handler (a wrong current
    // password), after validation, and the session stays.
    let token = await adminSession();
    let base = await send(baseline, token);
    if (base.status === 401 || base.status === 403) {
      const viaKey = await send(baseline, apiKey);
      if (viaKey.status !== 401 && viaKey.status !== 403) {
        token = apiKey;
        base = viaKey;
      }
    }
    if (base.status === 401 || base.status === 403) refusedAfterValidation.push(`${name} (${base.status})`);
    // The baseline must pass validation, or a violation's 400 would prove nothing.
    const baseError = (base.body as { error?: string } | undefined)?.error ?? '';
    if (base.status === 400 && SCHEMA_ERROR.test(baseError)) {
      failures.push(`${name}: the generated baseline does not pass validation: ${baseError}\n    ${JSON.stringify(baseline).slice(0, 300)}`);
      continue;
    }
    for (const v of cases) {
      checked++;
      byConstraint[v.constraint] = (byConstraint[v.constraint] ?? 0) + 1;
      // The same caller: a request refused by validation cannot end its session.
      const res = await send(v.request, token);
      const body = res.body as Record<string, unknown> | undefined;
      const shaped = res.type.includes('application/json') && body && Object.keys(body).length === 1 && typeof body.error === 'string';
      if (res.status !== 400 || !shaped || !SCHEMA_ERROR.test(String(body?.error)))
        failures.push(`${name} ${v.label}\n    -> ${res.status} ${res.text.slice(0, 200)} (expected 400 {error} from validation)`);
    }
  }
  console.log(
    `validation sweep: ${routes.length} operations, ${checked} violations; by constraint ${JSON.stringify(byConstraint)}; baseline refused after validation: ${refusedAfterValidation.join(', ') || 'none'}`,
  );
  expect(failures, `\n${failures.join('\n')}`).toEqual([]);
  // The constraints the minified build lost, and the common ones, named so none drops out unnoticed.
  for (const keyword of ['minimum', 'maximum', 'maxLength', 'required', 'type']) expect(byConstraint[keyword] ?? 0).toBeGreaterThan(0);
}, 300_000);

test('GET /api/billing/transactions?limit=0 is 400 on the binary (identifier minification turned it into 200)', async () => {
  for (const limit of ['0', '201', '-1', 'abc', '1.5']) {
    const res = await send({ method: 'GET', url: `/api/billing/transactions?limit=${limit}`, headers: {} }, await adminSession());
    expect({ limit, status: res.status, error: typeof (res.body as { error?: unknown })?.error }).toEqual({ limit, status: 400, error: 'string' });
  }
});
