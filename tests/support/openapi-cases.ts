/**
 * Requests generated from the OpenAPI document: for each operation, one request that satisfies
 * every schema (the baseline) and, for every constraint of every parameter and body field, the
 * baseline with that one constraint violated.
 *
 *   for (const route of routesOf(doc)) {
 *     const base = baselineRequest(route, hints);
 *     for (const v of violations(route, hints)) … // v.request differs from base in one place
 *   }
 *
 * Constraints covered: type, required, enum, const, minLength/maxLength, pattern, format (email,
 * date-time, uri), minimum/maximum and their exclusive forms, multipleOf and integer, minItems/
 * maxItems, array items, nested object properties, minProperties, patternProperties' type.
 * What HTTP cannot express is left out, each with its reason at the place it is decided.
 */

export type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  patternProperties?: Record<string, Schema>;
  minProperties?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  default?: unknown;
  nullable?: boolean;
};

export type Parameter = { in: 'query' | 'path' | 'header' | 'cookie'; name: string; required?: boolean; schema?: Schema };
export type Operation = {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; 'x-cpd-validated'?: boolean; content?: Record<string, { schema?: Schema }> };
};
export type Route = { method: string; path: string; op: Operation };

export interface SweepRequest {
  method: string;
  /** Path with parameters filled in and the query string. */
  url: string;
  headers: Record<string, string>;
  /** JSON body (undefined: none). */
  body?: unknown;
}

export interface Violation {
  /** e.g. "query limit: minimum 1 (sent 0)". */
  label: string;
  /** The schema keyword violated: minimum, maxLength, required, type, … */
  constraint: string;
  request: SweepRequest;
}

/** Values known to be valid for a parameter or field name (real ids, plausible enums), tried first. */
export type Hints = Record<string, unknown[]>;

export function routesOf(doc: { paths: Record<string, Record<string, Operation>> }): Route[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
}

const MISSING = Symbol('missing');
type Value = unknown | typeof MISSING;

/** The schema's types without "null"; a query number is anyOf [numeric string, number]. */
function typesOf(s: Schema): string[] {
  const own = (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []).filter((t) => t !== 'null');
  if (own.length) return own;
  const fromAnyOf = (s.anyOf ?? []).flatMap(typesOf);
  if (fromAnyOf.some((t) => t === 'number' || t === 'integer')) return fromAnyOf.filter((t) => t !== 'string');
  return fromAnyOf;
}

/** Bounds of a numeric schema, looking into anyOf branches too (Elysia's numeric query schema). */
function numeric(s: Schema): Schema & { integer: boolean } {
  const branch = (s.anyOf ?? []).find((b) => typesOf(b).some((t) => t === 'number' || t === 'integer')) ?? {};
  const merged = { ...branch, ...s };
  return { ...merged, integer: typesOf(s).includes('integer') || merged.multipleOf === 1 };
}

let unique = 0;

function matches(s: Schema, value: string): boolean {
  return s.pattern === undefined || new RegExp(s.pattern, 'u').test(value);
}

/** A value that satisfies `s` (hints first), or throws so a generator gap shows up as a failure. */
export function validValue(s: Schema, name: string, hints: Hints): unknown {
  for (const hint of hints[name] ?? []) if (satisfies(s, hint)) return hint;
  if (s.const !== undefined) return s.const;
  if (s.enum?.length) return s.enum[0];
  const types = typesOf(s);
  const type = types[0];
  if (type === 'number' || type === 'integer') {
    const n = numeric(s);
    if (typeof n.default === 'number' && satisfies(s, n.default)) return n.default;
    let v = n.minimum ?? (n.exclusiveMinimum !== undefined ? n.exclusiveMinimum + 1 : 1);
    if (v < 1 && (n.maximum ?? 1) >= 1) v = 1;
    if (n.multipleOf) v = Math.ceil(v / n.multipleOf) * n.multipleOf;
    return v;
  }
  if (type === 'boolean') return false;
  if (type === 'array') return Array.from({ length: s.minItems ?? 0 }, () => validValue(s.items ?? {}, `${name}[]`, hints));
  if (type === 'object' || s.properties) return validObject(s, hints);
  if (type === 'string' || type === undefined) {
    if (s.format === 'email') return `sweep-${++unique}@example.com`;
    if (s.format === 'date-time') return new Date().toISOString();
    if (s.format === 'uri' || s.format === 'url') return 'https://example.com/x';
    const alternatives = s.pattern ? /^\^\(([^()]+)\)\$$/.exec(s.pattern)?.[1]?.split('|') : undefined;
    if (alternatives?.[0] && matches(s, alternatives[0])) return alternatives[0];
    const plain = 'a'.repeat(Math.max(s.minLength ?? 1, 1));
    if (matches(s, plain)) return plain;
    throw new Error(`no valid value known for "${name}" (pattern ${s.pattern}): add a hint`);
  }
  return 'a';
}

function validObject(s: Schema, hints: Hints): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const props = s.properties ?? {};
  for (const [key, schema] of Object.entries(props)) if (s.required?.includes(key) || hints[key]) out[key] = validValue(schema, key, hints);
  // minProperties: add optional ones until there are enough.
  for (const [key, schema] of Object.entries(props)) {
    if (Object.keys(out).length >= (s.minProperties ?? 0)) break;
    out[key] ??= validValue(schema, key, hints);
  }
  return out;
}

/** A small structural check, enough to choose among hints (the server is the real validator). */
function satisfies(s: Schema, v: unknown): boolean {
  if (s.enum && !s.enum.includes(v)) return false;
  const types = typesOf(s);
  if (typeof v === 'string') {
    if (types.length && !types.includes('string')) return false;
    if (s.minLength !== undefined && v.length < s.minLength) return false;
    if (s.maxLength !== undefined && v.length > s.maxLength) return false;
    return matches(s, v);
  }
  if (typeof v === 'number') {
    const n = numeric(s);
    if (types.length && !types.some((t) => t === 'number' || t === 'integer')) return false;
    if (n.minimum !== undefined && v < n.minimum) return false;
    if (n.maximum !== undefined && v > n.maximum) return false;
    if (n.exclusiveMinimum !== undefined && v <= n.exclusiveMinimum) return false;
    return !(n.integer && !Number.isInteger(v));
  }
  return true;
}

type Where = 'query' | 'path' | 'header' | 'body';

/**
 * Values violating exactly one constraint of `s`, each with the constraint's name. `where` matters:
 * query, path and header values are always strings, so a string's "wrong type" cannot be sent there.
 */
function badValues(s: Schema, name: string, where: Where, hints: Hints, depth = 0): Array<[string, Value]> {
  const out: Array<[string, Value]> = [];
  const types = typesOf(s);
  const nullable = s.nullable || (Array.isArray(s.type) && s.type.includes('null'));
  const type = types[0] ?? (s.properties ? 'object' : undefined);
  const inBody = where === 'body';
  if (s.enum?.length) out.push(['enum', typeof s.enum[0] === 'number' ? -987654 : 'not-in-enum-zz']);
  if (s.const !== undefined) out.push(['const', 'not-the-const-zz']);
  if (type === 'string') {
    if (inBody) out.push(['type', 12345]);
    if (inBody && !nullable) out.push(['type (null)', null]);
    // An empty path segment is another URL (the route would not match), not a short value.
    if (s.minLength && !(where === 'path' && s.minLength === 1)) out.push([`minLength ${s.minLength}`, 'a'.repeat(s.minLength - 1)]);
    if (s.maxLength !== undefined) {
      const email = s.format === 'email';
      out.push([`maxLength ${s.maxLength}`, email ? `${'a'.repeat(s.maxLength + 1 - 12)}@example.com` : 'a'.repeat(s.maxLength + 1)]);
    }
    if (s.pattern) {
      const bad = ['!', 'zz-not-matching-zz', '0', ' '].find((c) => !matches(s, c) && c.length >= (s.minLength ?? 0));
      if (bad !== undefined) out.push([`pattern ${s.pattern}`, bad]);
    }
    if (s.format === 'email') out.push(['format email', 'not-an-email']);
    if (s.format === 'date-time') out.push(['format date-time', 'not-a-date']);
    if (s.format === 'uri' || s.format === 'url') out.push([`format ${s.format}`, 'not a uri']);
  } else if (type === 'number' || type === 'integer') {
    const n = numeric(s);
    out.push(['type', 'abc']);
    if (inBody && !nullable) out.push(['type (null)', null]);
    if (n.minimum !== undefined) out.push([`minimum ${n.minimum}`, n.minimum - 1]);
    if (n.exclusiveMinimum !== undefined) out.push([`exclusiveMinimum ${n.exclusiveMinimum}`, n.exclusiveMinimum]);
    if (n.maximum !== undefined) out.push([`maximum ${n.maximum}`, n.maximum + 1]);
    if (n.exclusiveMaximum !== undefined) out.push([`exclusiveMaximum ${n.exclusiveMaximum}`, n.exclusiveMaximum]);
    if (n.integer) {
      const low = n.minimum ?? (n.exclusiveMinimum ?? 0) + 1;
      out.push([n.multipleOf === 1 ? 'multipleOf 1' : 'integer', low + 0.5]);
    } else if (n.multipleOf) out.push([`multipleOf ${n.multipleOf}`, (n.minimum ?? 0) + n.multipleOf / 2]);
  } else if (type === 'boolean') {
    out.push(['type', inBody ? 'yes' : 'maybe']);
  } else if (type === 'array' && inBody) {
    out.push(['type', 'not-an-array']);
    const item = () => validValue(s.items ?? {}, `${name}[]`, hints);
    if (s.minItems) out.push([`minItems ${s.minItems}`, Array.from({ length: s.minItems - 1 }, item)]);
    if (s.maxItems !== undefined) out.push([`maxItems ${s.maxItems}`, Array.from({ length: s.maxItems + 1 }, item)]);
    if (depth < 3 && s.items)
      for (const [what, bad] of badValues(s.items, `${name}[]`, 'body', hints, depth + 1)) {
        const items = Array.from({ length: Math.max(s.minItems ?? 1, 1) }, item);
        items[0] = bad;
        out.push([`items: ${what}`, bad === MISSING ? MISSING : items]);
      }
  } else if (type === 'object' && inBody) {
    out.push(['type', 'not-an-object']);
    if (depth < 3) for (const [what, bad] of objectViolations(s, hints, depth + 1)) out.push([what, bad]);
  }
  return out;
}

/** Violations inside an object: each property's own, a missing required one, an extra one. */
function objectViolations(s: Schema, hints: Hints, depth: number): Array<[string, Record<string, unknown>]> {
  const base = validObject(s, hints);
  const out: Array<[string, Record<string, unknown>]> = [];
  for (const key of s.required ?? []) {
    const { [key]: _, ...rest } = base;
    out.push([`required ${key}`, rest]);
  }
  for (const [key, schema] of Object.entries(s.properties ?? {}))
    for (const [what, bad] of badValues(schema, key, 'body', hints, depth)) out.push([`${key}: ${what}`, { ...base, [key]: bad }]);
  // additionalProperties: false is not a refusal here: unknown body fields are dropped (the API's
  // rule, Elysia's normalization), so an extra field is no violation.
  if (s.minProperties) out.push([`minProperties ${s.minProperties}`, {}]);
  for (const [pattern, schema] of Object.entries(s.patternProperties ?? {}))
    if (typesOf(schema).includes('string')) out.push([`patternProperties ${pattern}: type`, { ...base, zz: 12345 }]);
  return out;
}

/** "items: price: minimum 0" → "minimum". */
function keyword(what: string): string {
  return what.split(': ').at(-1)!.split(' ')[0]!;
}

/** The body's schema when the schema validates it; a body only described for readers (x-cpd-validated: false) is the handler's to check. */
function bodySchema(op: Operation): Schema | undefined {
  if (op.requestBody?.['x-cpd-validated'] === false) return undefined;
  return op.requestBody?.content?.['application/json']?.schema;
}

interface Parts {
  path: Record<string, string>;
  query: Record<string, string>;
  header: Record<string, string>;
  body?: unknown;
}

function baselineParts(route: Route, hints: Hints): Parts {
  const parts: Parts = { path: {}, query: {}, header: {} };
  for (const p of route.op.parameters ?? []) {
    if (p.in === 'cookie') continue;
    // Optional query parameters stay out of the baseline (a filter would change what is listed).
    if (p.in !== 'path' && !p.required && !hints[p.name]) continue;
    parts[p.in][p.name] = String(validValue(p.schema ?? {}, p.name, hints));
  }
  const schema = bodySchema(route.op);
  if (schema) parts.body = validValue(schema, 'body', hints);
  return parts;
}

function toRequest(route: Route, parts: Parts): SweepRequest {
  const path = route.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(parts.path[name] ?? 'x')).replace(/\*$/, 'x');
  const query = new URLSearchParams(parts.query).toString();
  const headers = { ...parts.header };
  if (parts.body !== undefined) headers['content-type'] = 'application/json';
  return { method: route.method, url: query ? `${path}?${query}` : path, headers, body: parts.body };
}

export function baselineRequest(route: Route, hints: Hints): SweepRequest {
  return toRequest(route, baselineParts(route, hints));
}

export function violations(route: Route, hints: Hints): Violation[] {
  const base = baselineParts(route, hints);
  const out: Violation[] = [];
  const show = (v: unknown) => {
    const text = v === MISSING ? '(absent)' : JSON.stringify(v) ?? String(v);
    return text.length > 60 ? `${text.slice(0, 60)}… (${text.length} chars)` : text;
  };
  for (const p of route.op.parameters ?? []) {
    if (p.in === 'cookie') continue;
    const where = p.in;
    if (p.required && where !== 'path') {
      const { [p.name]: _, ...rest } = base[where];
      out.push({ label: `${where} ${p.name}: required`, constraint: 'required', request: toRequest(route, { ...base, [where]: rest }) });
    }
    for (const [what, bad] of badValues(p.schema ?? {}, p.name, where, hints)) {
      if (bad === MISSING || bad === null) continue;
      // Every HTTP parameter is text: a "wrong type" is the same text as the others.
      const text = String(bad);
      out.push({
        label: `${where} ${p.name}: ${what} (sent ${show(text)})`,
        constraint: keyword(what),
        request: toRequest(route, { ...base, [where]: { ...base[where], [p.name]: text } }),
      });
    }
  }
  const schema = bodySchema(route.op);
  if (schema) {
    if (route.op.requestBody?.required !== false && typesOf(schema).includes('object'))
      out.push({ label: 'body: required (none sent)', constraint: 'required', request: { ...toRequest(route, { ...base, body: undefined }), headers: { ...toRequest(route, base).headers } } });
    for (const [what, bad] of badValues(schema, 'body', 'body', hints)) {
      if (bad === MISSING) continue;
      out.push({ label: `body ${what} (sent ${show(bad)})`, constraint: keyword(what), request: toRequest(route, { ...base, body: bad }) });
    }
  }
  return out;
}
