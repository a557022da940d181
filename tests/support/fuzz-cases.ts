/**
 * The no-500 fuzz's case generators, shared by the in-process run (tests/e2e/no-500.fuzz.test.ts)
 * and the run against dist/cpd (tests/e2e/no-500.binary.test.ts): bounded, seeded hostile inputs
 * per route of the OpenAPI document, and the check every answer must pass ("no input may produce
 * a 500; every non-2xx body is {"error": "..."}").
 */
import fc from 'fast-check';
import { isAnthropicError, speaksAnthropic } from './error-shape';

const HUGE = 'x'.repeat(100_000);
const GARBAGE_PATH_PARAMS = [
  '..%2F..',
  '..%2F..%2Fetc%2Fpasswd',
  'a'.repeat(5000),
  '%00',
  'a%00b',
  '%E2%98%83',
  '%F0%9F%92%A5',
  '-1',
  '0',
  '1e309',
  'null',
  '%25',
  "x'%20or%201=1--",
  '%C0%AF',
];
const GARBAGE_QUERY_VALUES = [
  '-1',
  'abc',
  'garbage',
  'notadate',
  '1e309',
  'NaN',
  '',
  '%00',
  'a'.repeat(10_000),
  '99999999999999999999999',
  '0',
  '2026-13-45T99:99:99Z',
  '%E2%98%83',
  '-0.5',
];
const GENERIC_QUERY_NAMES = ['limit', 'cursor', 'from', 'to', 'after', 'order'];
const WRONG_TYPE_VALUES: unknown[] = [
  [],
  [1, 'a', null],
  0,
  -1,
  1.5,
  -1e308,
  'NaN',
  '-1',
  '1e309',
  null,
  true,
  { a: { b: { c: { d: [] } } } },
  HUGE,
  '\u0000',
  'a\u0000b',
  '\uD800',
  '💥☃',
  '9007199254740993',
  '',
];
export const BOGUS_TOKENS = ['', 'x'.repeat(10_000), 'cpd_garbage', 'sk-%00', 'a.b.c', '\u00ff\u00fe'];
/** Headers handlers read (ranges on downloads, idempotency on payments, forwarded address for rate limits, cookies). */
export const HOSTILE_HEADERS: Array<[string, string]> = [
  ['range', 'bytes=abc'],
  ['range', 'bytes=-0'],
  ['range', 'bytes=99999999999999999999-'],
  ['range', 'bytes=5-1'],
  ['range', 'bytes=0-1,2-3,4-5'],
  ['if-range', 'garbage'],
  ['if-none-match', '*'],
  ['idempotency-key', 'k'.repeat(10_000)],
  ['idempotency-key', ' '],
  ['x-forwarded-for', 'not-an-ip, ::::'],
  ['cookie', 'session=%00; a=b=c; ;;'],
  ['cookie', 'cpd_session=%E0%A4%A'],
  ['cookie', 'cpd_session=%; cpd_session=%ZZ'],
  // Hostile session cookies: wrong, empty, repeated, oversized, a key where a session goes.
  ['cookie', 'cpd_session='],
  ['cookie', 'cpd_session'],
  ['cookie', 'cpd_session=a; cpd_session=b'],
  ['cookie', `cpd_session=${'x'.repeat(10_000)}`],
  ['cookie', 'cpd_session=bfvk-0000000000000000000000000000000000000000'],
  ['cookie', 'cpd_session="quoted"; theme=dark'],
  // Hostile origins (the CSRF checks read them).
  ['origin', 'null'],
  ['origin', 'https://evil.example'],
  ['origin', 'http://localhost:8080.evil.example'],
  ['origin', '%%%'],
  ['origin', 'x'.repeat(10_000)],
  ['sec-fetch-site', 'cross-site'],
  ['sec-fetch-site', 'same-origin'],
  ['accept', 'text/event-stream'],
  ['accept-encoding', 'gzip;q=abc'],
  ['content-length', '-1'],
];
const RAW_BODIES = [
  '{"a":',
  '{',
  'not json',
  '[]',
  'null',
  '"str"',
  '123',
  '1e309',
  '{"x":1e309}',
  '\u0000',
  '{"__proto__":{"isAdmin":true}}',
  `"${HUGE}"`,
];
const TYPED_HOSTILE: Record<string, unknown[]> = {
  string: ['', HUGE, '\u0000', '..%2F..', '💥☃\uD800', '-1', 'NaN', '1e309', ' '],
  number: [-1, 0, -0.000001, 1e308, -1e308, 2 ** 53 + 2, 0.1],
  integer: [-1, 0, 2 ** 53, -(2 ** 31) - 1, 2 ** 63],
  boolean: [true, false],
  array: [[], [null], Array.from({ length: 1000 }, () => 'x')],
  object: [{}, { a: null }],
};

/** Well-formed values for common body fields (a fresh copy: tests add real ids to it). */
export function plausibleValues(): Record<string, unknown[]> {
  return {
  email: ['fuzz@example.com'],
  password: ['correct horse battery staple'],
  code: ['000000'],
  challenge_token: ['x'],
  name: ['fuzz'],
  provider: ['card', 'chat_wallet', 'app_wallet'],
  amount: [10, 1e308, 1e-9, 1e15, 0.1],
  currency: ['USD', 'CNY', 'usd'],
  model: ['test-model'],
  role: ['user', 'tool'],
  content: ['hello'],
  title: ['Invoice'],
  metadata: [{ a: 'b' }],
  };
}

export type Operation = { parameters?: Array<{ in: string; name: string }>; requestBody?: { content?: Record<string, { schema?: Schema }> } };
export type Schema = { type?: string | string[]; properties?: Record<string, Schema>; anyOf?: Schema[] };
export type Route = { method: string; path: string; op: Operation; undeclared?: boolean };
export type Caller = 'none' | 'bogus' | 'session' | 'key' | 'admin';
export type Input = { path: string; query: string; body?: string; contentType?: string; header?: [string, string] };

/** Routes kept out of the document on purpose (agents' recognized-but-unimplemented paths, which answer 501). */
export const HIDDEN_ROUTES: Route[] = [
  ...['/v1/vaults', '/v1/vaults/{id}', '/v1/agents/environments', '/v1/agents/sessions/{id}/artifacts'].map((path) => ({ method: 'POST', path, op: {} })),
  // The exact path /v1/agents/:id would shadow.
  { method: 'GET', path: '/v1/agents/environments', op: {} },
];

function bodySchema(op: Operation): Schema | undefined {
  return op.requestBody?.content?.['application/json']?.schema;
}

function typeOf(s: Schema): string | undefined {
  const ty = Array.isArray(s.type) ? s.type[0] : s.type;
  return ty ?? (s.anyOf?.[0] ? typeOf(s.anyOf[0]) : undefined);
}

/** Builds the seeded hostile inputs for one route: garbage path params, query params and bodies. */
export function inputsFor(route: Route, seed: number, opts: { realIds: string[]; plausible: Record<string, unknown[]>; count: number }): Input[] {
  const { realIds, plausible } = opts;
  const queryNames = [
    ...new Set([...(route.op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name), ...GENERIC_QUERY_NAMES]),
  ];
  const props = Object.entries(bodySchema(route.op)?.properties ?? {});
  const takesBody = !['GET', 'HEAD'].includes(route.method);
  const bodyArb = fc.oneof(
    fc.constantFrom(...RAW_BODIES).map((raw) => ({ raw })),
    fc.constantFrom(...WRONG_TYPE_VALUES).map((value) => ({ raw: JSON.stringify(value) })),
    // Every declared property set to a hostile value: half the time of the declared type (to get
    // past validation into the service), otherwise of a wrong type.
    fc
      .tuple(
        ...props.map(([, s]) =>
          fc.oneof(fc.constantFrom(...(TYPED_HOSTILE[typeOf(s) ?? ''] ?? WRONG_TYPE_VALUES)), fc.constantFrom(...WRONG_TYPE_VALUES)),
        ),
        fc.boolean(),
      )
      .map(([...vals]) => {
        const dropSome = vals.pop() as boolean;
        const obj: Record<string, unknown> = {};
        props.forEach(([name], i) => {
          if (!(dropSome && i % 2 === 1)) obj[name] = vals[i];
        });
        return { raw: JSON.stringify(obj) };
      }),
    // A plausible body with one declared property made hostile.
    fc
      .tuple(fc.nat(), fc.constantFrom(...WRONG_TYPE_VALUES, ...Object.values(TYPED_HOSTILE).flat()), fc.nat())
      .map(([pick, hostile, variant]) => {
        const obj: Record<string, unknown> = {};
        for (const [name, s] of props) {
          const options = plausible[name] ?? TYPED_HOSTILE[typeOf(s) ?? ''] ?? ['x'];
          obj[name] = options[variant % options.length];
        }
        if (props.length) obj[props[pick % props.length]![0]] = hostile;
        return { raw: JSON.stringify(obj) };
      }),
    fc.constant({ raw: undefined as string | undefined }),
  );
  const caseArb = fc.record({
    pathParams: fc.array(fc.oneof(fc.constantFrom(...GARBAGE_PATH_PARAMS), fc.constantFrom(...realIds)), { minLength: 3, maxLength: 3 }),
    query: fc
      .subarray(queryNames, { minLength: 0, maxLength: 3 })
      .chain((names) =>
        fc.tuple(
          fc.constant(names),
          fc.array(fc.constantFrom(...GARBAGE_QUERY_VALUES), { minLength: names.length, maxLength: names.length }),
        ),
      ),
    body: bodyArb,
    header: fc.option(fc.constantFrom(...HOSTILE_HEADERS), { freq: 2 }),
    contentType: fc.constantFrom(
      'application/json',
      'application/json',
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'multipart/form-data',
      'application/octet-stream',
      'application/json; charset=utf-8',
      'application/merge-patch+json',
      'application/jsonx',
      'text/html',
      '',
    ),
  });
  let paramIndex = 0;
  return fc.sample(caseArb, { seed, numRuns: opts.count }).map((c) => ({
    path: route.path.replace(/\{[^}]+\}|\*$/g, () => c.pathParams[paramIndex++ % 3]!),
    query: c.query[0].map((n, i) => `${n}=${c.query[1][i]}`).join('&'),
    body: takesBody ? c.body.raw : undefined,
    contentType: takesBody && c.body.raw !== undefined ? c.contentType : undefined,
    header: c.header ?? undefined,
  }));
}

/** 501 is the agents' documented answer for unimplemented paths; 502/503 where an upstream is absent in this test. */
export function allowedServerError(path: string, status: number): boolean {
  if (status === 501) return /^\/v1\/(vaults|agents\/environments|agents\/sessions\/[^/]+\/artifacts)/.test(path);
  // Release downloads ask GitHub (a closed port here); the gateway has no backends in this test.
  if (status === 502 || status === 503) return /^\/(api\/download\/|downloads|v1\/chat\/completions)/.test(path);
  return false;
}

export function describeBody(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} chars)` : text;
}


/** Every route of the document plus the hidden ones, and for each path the methods it does not declare. */
export function fuzzRoutes(doc: { paths: Record<string, Record<string, Operation>> }, undeclaredMethods: string[]): Route[] {
  const routes: Route[] = [
    ...Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op }))),
    ...HIDDEN_ROUTES,
  ];
  for (const path of new Set(routes.map((r) => r.path))) {
    for (const method of undeclaredMethods)
      if (!routes.some((r) => r.path === path && r.method === method)) routes.push({ method, path, op: {}, undeclared: true });
  }
  return routes;
}

/** The request line and what was hostile about it, for a failure report. */
export function labelOf(route: Route, caller: Caller, input: Input): string {
  const url = input.query ? `${input.path}?${input.query}` : input.path;
  return `${route.method} ${route.path} as ${caller}: ${route.method} ${describeBody(url)}${input.header ? ` ${input.header[0]}: ${describeBody(input.header[1])}` : ''} body=${describeBody(JSON.stringify(input.body ?? null))} [${input.contentType ?? '-'}]`;
}

/** Headers for one input: the caller's bearer token, the content type, the hostile header. */
export function headersOf(input: Input, token: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (input.contentType) headers['content-type'] = input.contentType;
  if (input.header) headers[input.header[0]] = input.header[1];
  return headers;
}

export function checkResponse(route: Route, input: Input, res: Response, text: string): string | undefined {
  if (res.status >= 500 && !allowedServerError(input.path, res.status)) return 'server error';
  if (res.status < 400 || route.method === 'HEAD') return undefined;
  if (!(res.headers.get('content-type') ?? '').includes('application/json')) return `content-type ${res.headers.get('content-type')}`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'body is not JSON';
  }
  // Documented exception: a second invoice request for the same payment answers 409 with the existing invoice.
  if (res.status === 409 && route.path.includes('invoice')) return undefined;
  if (speaksAnthropic(input.path.split('?')[0]!)) return isAnthropicError(body) ? undefined : "body is not Anthropic's error shape";
  const keys = body && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : [];
  if (keys.length !== 1 || keys[0] !== 'error' || typeof (body as { error: unknown }).error !== 'string')
    return 'body is not exactly {error: string}';
  return undefined;
}
