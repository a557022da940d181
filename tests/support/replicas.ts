/**
 * The replica test bed: N `dist/cpd serve` processes of one site (one database, one SECRET_KEY,
 * one S3 bucket on s3rver) behind a round-robin proxy, a fake upstream model, and an admin.
 *
 *   const bed = await startReplicaBed({ postgres: 'shared' });   // or 'private': a cluster of its own
 *   await bed.call(bed.lb.url, 'POST', '/api/auth/login', undefined, {...});
 *   bed.outage = 'db cut';  …  bed.outage = null;   // 5xx seen meanwhile are allowed
 *   expect(bed.unexpected5xx()).toEqual([]);
 *   await bed.close();
 *
 * postgres: 'shared' gives the replicas a database of their own on the machine's server, reached
 * through a TCP proxy (`pgLink`) that can cut every connection; 'private' starts a PostgreSQL
 * cluster of the bed's own (tests/support/private-postgres.ts) that the test may stop, crash and
 * restart (`pg`), the replicas connected to it directly. `database` is the test's own handle on the
 * same database, for the invariants (it reconnects by itself after a restart).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import S3rver from 's3rver';
import { type Database, openDatabase } from '../../src/platform/db';
import { TEST_SECRET } from './app';
import { baseEnv, ensureBuilt, type RunningBinary, startBinary } from './binary';
import { createTestDatabase } from './db';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';
import { type PrivatePostgres, startPrivatePostgres } from './private-postgres';
import { type RoundRobinProxy, startRoundRobinProxy } from './round-robin-proxy';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

export const ADMIN = { email: 'admin@example.com', password: 'admin password 123' };

export interface ReplicaBedOptions {
  postgres: 'shared' | 'private';
  /** How many replicas (default 3). */
  replicas?: number;
  /** Models the fake upstream serves (default ['m1']). */
  models?: string[];
  /** Added to (and overriding) the replicas' environment. */
  env?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

export interface ReplicaBed {
  database: Database;
  pg: PrivatePostgres | null;
  pgLink: TcpProxy | null;
  up: FakeUpstream;
  /** The S3 endpoint of the shared object store. */
  s3Endpoint: string;
  /** The replicas' environment (DATABASE_URL, SECRET_KEY, STORAGE_URL and S3, MODEL_BACKENDS …). */
  env: Record<string, string>;
  replicas: RunningBinary[];
  lb: RoundRobinProxy;
  adminToken: string;
  /** What is being done to the bed right now ('db cut', 'pg restart' …): recorded with every status. */
  outage: string | null;
  /** Every status a client saw through recordingFetch, with the outage going on then. */
  statuses: Array<{ status: number; outage: string | null; path: string }>;
  /** fetch that records the status; every helper below goes through it. */
  recordingFetch: typeof fetch;
  call(base: string, method: string, path: string, token?: string, body?: unknown, headers?: Record<string, string>): Promise<CallResult>;
  openai(base: string, key: string): OpenAI;
  /** Every replica's warning and error lines (the last 30 of each), to print when a step fails. */
  warnings(): string;
  /** Runs `dist/cpd ARGS` with the replicas' environment (in a temp DATA_DIR); throws on a non-zero exit. */
  cli(args: string[]): Promise<string>;
  /** Replicas not killed or stopped. */
  alive(): RunningBinary[];
  /** 5xx answers seen while no outage was declared. */
  unexpected5xx(): Array<{ status: number; path: string }>;
  close(): Promise<void>;
}

export async function startReplicaBed(opts: ReplicaBedOptions): Promise<ReplicaBed> {
  const binary = await ensureBuilt();
  const models = opts.models ?? ['m1'];
  const s3Dir = mkdtempSync(join(tmpdir(), 'cpd-replicas-s3-'));
  const s3 = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: s3Dir,
    configureBuckets: [{ name: 'models', configs: [] }],
  });
  const [up, s3Address] = await Promise.all([startFakeUpstream({ models }), s3.run() as Promise<AddressInfo>]);
  const s3Endpoint = `http://127.0.0.1:${s3Address.port}`;

  let pg: PrivatePostgres | null = null;
  let pgLink: TcpProxy | null = null;
  let database: Database;
  let databaseUrl: string;
  let dropDatabase: () => Promise<void>;
  if (opts.postgres === 'shared') {
    const db = await createTestDatabase('postgres');
    const url = new URL(db.url!);
    pgLink = await startTcpProxy(Number(url.port || 5432), url.hostname);
    url.port = String(pgLink.port);
    databaseUrl = url.toString();
    database = db.database;
    dropDatabase = () => db.drop();
  } else {
    pg = await startPrivatePostgres();
    databaseUrl = await pg.createDatabase('cpd');
    database = await openDatabase({ databaseUrl, maxConnections: 2 });
    dropDatabase = () => database.close();
  }

  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    SECRET_KEY: TEST_SECRET,
    MODEL_BACKENDS: models.map((m) => `${m}=${up.url}`).join(','),
    TRUST_PROXY: 'true',
    STORAGE_URL: 's3://models/cpd',
    S3_ENDPOINT: s3Endpoint,
    S3_REGION: 'us-east-1',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    // One client address (the loopback proxy) makes every request: the named limits are not under test here.
    RATE_LIMITS: 'register=1000/1m,login=1000/1m,download=1000/1m,gateway=100000/1m',
    ...opts.env,
  };

  const statuses: ReplicaBed['statuses'] = [];
  const recordingFetch: typeof fetch = Object.assign(
    async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      const outage = bed.outage;
      const res = await fetch(input, init);
      statuses.push({
        status: res.status,
        outage: outage ?? bed.outage,
        path: new URL(String(input instanceof Request ? input.url : input)).pathname,
      });
      return res;
    },
    { preconnect: fetch.preconnect },
  );

  async function cli(args: string[]): Promise<string> {
    const cwd = mkdtempSync(join(tmpdir(), 'cpd-replicas-cli-'));
    try {
      const proc = Bun.spawn([binary, ...args], {
        cwd,
        env: { ...baseEnv(), ...env, DATA_DIR: join(cwd, 'data') },
        stdout: 'pipe',
        stderr: 'pipe',
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      if (code !== 0) throw new Error(`cpd ${args.join(' ')} failed (${code}):\n${out}${err}`);
      return out;
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }

  async function call(
    base: string,
    method: string,
    path: string,
    token?: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<CallResult> {
    const res = await recordingFetch(`${base}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
    });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      text,
      body: res.headers.get('content-type')?.includes('json') && text ? JSON.parse(text) : null,
    };
  }

  // On an empty (private) database the first replica migrates and the others wait on its advisory lock.
  const replicas = await Promise.all(Array.from({ length: opts.replicas ?? 3 }, () => startBinary({ env })));
  const lb = startRoundRobinProxy(replicas.map((r) => r.url));

  const bed: ReplicaBed = {
    database,
    pg,
    pgLink,
    up,
    s3Endpoint,
    env,
    replicas,
    lb,
    adminToken: '',
    outage: null,
    statuses,
    recordingFetch,
    call,
    openai: (base, key) => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, fetch: recordingFetch }),
    cli,
    alive: () => replicas.filter((r) => r.proc.exitCode === null && r.proc.signalCode === null),
    warnings: () =>
      replicas
        .map((r) => `replica ${r.url}:\n${r.logs().split('\n').filter((l) => /"level":"(warn|error)"/.test(l)).slice(-30).join('\n')}`)
        .join('\n'),
    unexpected5xx: () => statuses.filter((s) => s.status >= 500 && s.outage === null).map(({ status, path }) => ({ status, path })),
    async close() {
      // A replica that ended on its own (not stopped or killed by the test) says why.
      for (const r of replicas)
        if (r.proc.exitCode !== null && r.proc.exitCode !== 0)
          console.error(`replica ${r.url} exited with ${r.proc.exitCode}; its last lines:\n${r.logs().split('\n').filter((l) => !l.includes('"msg":"request"')).slice(-25).join('\n')}`);
      lb.close();
      await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
      await up.close();
      await pgLink?.close();
      await dropDatabase().catch(() => {});
      await pg?.close();
      await s3.close();
      rmSync(s3Dir, { recursive: true, force: true });
    },
  };

  await cli(['users', 'create', '--email', ADMIN.email, '--password', ADMIN.password, '--admin']);
  const login = await call(lb.url, 'POST', '/api/auth/login', undefined, { identifier: ADMIN.email, password: ADMIN.password });
  if (login.status !== 200) throw new Error(`admin login failed: ${login.status} ${login.text}`);
  bed.adminToken = login.body.token;
  return bed;
}
