/**
 * Start-up and operator commands on dist/cpd: what an operator can get wrong (DATA_DIR, the key
 * file, an unreachable database, running `cpd users create` from the wrong place or beside the
 * server) stops with one line on stderr and exit 2, never a stack trace and never a new database
 * where an existing one was expected. The first-admin path of the systemd layout works.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, ensureBuilt, startBinary } from '../support/binary';
import postgres from 'postgres';
import { createEmptyPostgresDatabase, createTestDatabase } from '../support/db';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres';
import { waitFor } from '../support/wait';

let cpd: string;
let root: string;

beforeAll(async () => {
  cpd = await ensureBuilt();
  root = mkdtempSync(join(tmpdir(), 'cpd-startup-'));
}, 120_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs dist/cpd to completion in `cwd` (default: a fresh directory under root). */
async function run(args: string[], env: Record<string, string> = {}, cwd = mkdtempSync(join(root, 'cwd-'))) {
  const proc = Bun.spawn([cpd, ...args], { cwd, env: { ...baseEnv(), ...env }, stdout: 'pipe', stderr: 'pipe' });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code, cwd };
}

/** Exit 2 and exactly one line on stderr, containing every `parts`; no stack frame. */
function expectOneLineRefusal(r: { stderr: string; code: number }, ...parts: string[]) {
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: expect.any(String) });
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  for (const part of parts) expect(lines[0]).toContain(part);
  expect(r.stderr).not.toMatch(/\$bunfs|^\s*at |Error:/m);
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A DATA_DIR nobody can create, root included: its parent is a regular file. */
function unwritableDataDir(): string {
  const file = join(mkdtempSync(join(root, 'file-')), 'not-a-directory');
  writeFileSync(file, '');
  return join(file, 'data');
}

describe('DATA_DIR and the key file', () => {
  test('an unwritable DATA_DIR on the embedded database: one line naming DATA_DIR, exit 2', async () => {
    expectOneLineRefusal(await run(['serve'], { DATA_DIR: unwritableDataDir() }), 'DATA_DIR');
  });

  test('an unwritable DATA_DIR with DATABASE_URL set is refused at start-up, not at the first payment', async () => {
    const db = await createTestDatabase('postgres');
    try {
      expectOneLineRefusal(await run(['serve'], { DATA_DIR: unwritableDataDir(), DATABASE_URL: db.url! }), 'DATA_DIR');
    } finally {
      await db.drop();
    }
  });

  test('a TMPDIR the password hasher cannot run from: one line naming TMPDIR, exit 2, before it listens', async () => {
    const db = await createTestDatabase('postgres');
    try {
      const missing = join(root, 'no-such-tmp');
      const r = await run(['serve'], { DATA_DIR: mkdtempSync(join(root, 'data-')), DATABASE_URL: db.url!, TMPDIR: missing, LOG_LEVEL: 'info' });
      expect(r.stdout).not.toContain('listening');
      expectOneLineRefusal(r, 'password hasher', `TMPDIR (${missing})`, 'cannot open shared object file');
      // A command that hashes a password stops the same way.
      const create = await run(['users', 'create', '--email', 'a@example.com', '--password', 'correct horse battery'], { DATA_DIR: mkdtempSync(join(root, 'data-')), DATABASE_URL: db.url!, TMPDIR: missing });
      expectOneLineRefusal(create, 'password hasher', 'TMPDIR');
    } finally {
      await db.drop();
    }
  });

  test('a second server on a port already served (another site given the same PORT): one line, exit 2; the first keeps all the traffic', async () => {
    const [intl, cn] = [await createTestDatabase('postgres'), await createTestDatabase('postgres')];
    const first = await startBinary({ env: { DATABASE_URL: intl.url!, DATA_DIR: mkdtempSync(join(root, 'data-')) } });
    try {
      const port = new URL(first.url).port;
      const r = await run(['serve'], { SITE: 'cn', PORT: port, DATABASE_URL: cn.url!, DATA_DIR: mkdtempSync(join(root, 'data-')), LOG_LEVEL: 'warn' });
      expectOneLineRefusal(r, `cannot listen on 127.0.0.1:${port}`);
      const sites = await Promise.all(Array.from({ length: 8 }, async () => ((await (await fetch(`${first.url}/api/site`)).json()) as { site: string }).site));
      expect(new Set(sites)).toEqual(new Set(['intl']));
    } finally {
      expect(await first.stop()).toBe(0);
      await Promise.all([intl.drop(), cn.drop()]);
    }
  }, 90_000);

  test('an empty secret_key file is refused (one line, exit 2), not used as an empty HMAC key', async () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    writeFileSync(join(dataDir, 'secret_key'), '\n');
    const db = await createTestDatabase('postgres');
    try {
      expectOneLineRefusal(await run(['serve'], { DATA_DIR: dataDir, DATABASE_URL: db.url! }), 'secret_key');
    } finally {
      await db.drop();
    }
  });
});

describe('an unreachable database', () => {
  for (const command of [['serve'], ['migrate']]) {
    test(`cpd ${command[0]}: "cannot connect to the database" naming host:port, never the password, exit 2`, async () => {
      const port = await closedPort();
      const r = await run(command, { DATABASE_URL: `postgres://cpd:hunter2-secret@127.0.0.1:${port}/cpd` });
      expectOneLineRefusal(r, 'cannot connect to the database', `127.0.0.1:${port}`);
      expect(r.stderr).not.toContain('hunter2-secret');
      expect(r.stderr).not.toContain('migrations failed');
    });
  }
});

/** dist/cpd serve on `databaseUrl` answers /healthz 200, then stops cleanly. */
async function expectServesHealthz(databaseUrl: string) {
  const server = await startBinary({ env: { DATABASE_URL: databaseUrl, DATA_DIR: mkdtempSync(join(root, 'pg-')) } });
  try {
    const res = await fetch(`${server.url}/healthz`);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { status: 'ok' } });
  } finally {
    expect(await server.stop()).toBe(0);
  }
}

describe('PostgreSQL that asks for a password (SCRAM-SHA-256, as managed services do)', () => {
  let pg: PrivatePostgres;
  let url: string;
  beforeAll(async () => {
    pg = await startPrivatePostgres({ password: 'cpd-s3cret' });
    url = await pg.createDatabase('cpd');
  }, 120_000);
  afterAll(() => pg.close());

  test('cpd serve authenticates, migrates and answers /healthz', () => expectServesHealthz(url));

  test('a password rotated under a running server: 503 "database unavailable" while it is wrong, serving again once it is right', async () => {
    const server = await startBinary({ env: { DATABASE_URL: url, DATA_DIR: mkdtempSync(join(root, 'scram-')) } });
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    const health = async () => {
      const res = await fetch(`${server.url}/healthz`);
      return { status: res.status, body: await res.json() };
    };
    try {
      expect(await health()).toEqual({ status: 200, body: { status: 'ok' } });
      await admin`alter role postgres password 'rotated-s3cret'`;
      // Open connections stay authenticated: end them, so the server has to log in again.
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = 'cpd' and pid <> pg_backend_pid()`;
      await waitFor(async () => (await health()).status === 503, 'a 503 while the password is wrong');
      expect(await health()).toEqual({ status: 503, body: { error: 'database unavailable' } });
      // A request that reads the database gets the same answer, not a 500.
      const login = await fetch(`${server.url}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: 'nobody@example.com', password: 'not-a-password' }),
      });
      expect({ status: login.status, body: await login.json() }).toEqual({ status: 503, body: { error: 'database unavailable' } });
      await admin`alter role postgres password 'cpd-s3cret'`;
      await waitFor(async () => (await health()).status === 200, 'serving again');
      expect(server.logs()).not.toContain('s3cret');
    } finally {
      await admin`alter role postgres password 'cpd-s3cret'`;
      await admin.end();
      expect(await server.stop()).toBe(0);
    }
  });

  test('a wrong password or database name: "cannot connect" naming host:port/name and why, never the password, exit 2', async () => {
    for (const [wrong, why] of [
      [url.replace('cpd-s3cret', 'not-the-s3cret'), 'password authentication failed'],
      [url.replace(/\/cpd$/, '/cdp'), 'database "cdp" does not exist'],
    ] as const) {
      const r = await run(['serve'], { DATABASE_URL: wrong, DATA_DIR: mkdtempSync(join(root, 'scram-')) });
      expectOneLineRefusal(r, 'cannot connect to the database', `127.0.0.1:${pg.port}/`, why);
      expect(r.stderr).not.toContain('s3cret');
    }
  });
});

describe('PostgreSQL with MD5 password authentication (older managed services)', () => {
  let pg: PrivatePostgres;
  beforeAll(async () => {
    pg = await startPrivatePostgres({ password: 'cpd-md5-s3cret', auth: 'md5' });
  }, 120_000);
  afterAll(() => pg.close());

  test('cpd serve authenticates with MD5, migrates and answers /healthz', async () => {
    const url = await pg.createDatabase('cpd');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await admin`select rolpassword like 'md5%' as md5 from pg_authid where rolname = 'postgres'`;
      expect(row?.md5).toBe(true);
    } finally {
      await admin.end();
    }
    await expectServesHealthz(url);
  });
});

describe('the first admin on the systemd layout (DATA_DIR in the env file)', () => {
  let siteDir: string;
  let envFile: string;
  beforeAll(() => {
    siteDir = mkdtempSync(join(root, 'site-'));
    envFile = join(siteDir, 'intl.env');
    writeFileSync(envFile, `# as deploy/intl.env\nSITE=intl\nDATA_DIR=${join(siteDir, 'state')}\nSECRET_KEY=${'s'.repeat(40)}\n`);
  });
  const admin = ['--email', 'admin@example.com', '--password', 'correct horse battery', '--admin'];

  test('run from another directory without the environment: refused, and no ./data database appears', async () => {
    const r = await run(['users', 'create', ...admin]);
    expectOneLineRefusal(r, 'no database', 'DATA_DIR');
    expect(readdirSync(r.cwd)).toEqual([]);
  });

  test('before the server ever ran: refused too (no database where one was expected)', async () => {
    const r = await run(['users', 'create', ...admin, '--env-file', envFile]);
    expectOneLineRefusal(r, 'no database', join(siteDir, 'state'));
    expect(existsSync(join(siteDir, 'state', 'pg'))).toBe(false);
  });

  test('beside a running server on the embedded database: refused with one line, the server keeps serving', async () => {
    const server = await startBinary({ args: ['serve', '--env-file', envFile] });
    try {
      const r = await run(['users', 'create', ...admin, '--env-file', envFile]);
      expectOneLineRefusal(r, 'in use', 'stop it first');
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 90_000);

  test('server stopped: `cpd users create --env-file` from any directory creates the admin the server then serves', async () => {
    const r = await run(['users', 'create', ...admin, '--env-file', envFile]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ id: expect.any(String), email: 'admin@example.com' });
    expect(readdirSync(r.cwd)).toEqual([]);

    const server = await startBinary({ args: ['serve', '--env-file', envFile] });
    try {
      const login = await fetch(`${server.url}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: 'admin@example.com', password: 'correct horse battery' }),
      });
      expect(login.status).toBe(200);
      const { token } = (await login.json()) as { token: string };
      const me = await fetch(`${server.url}/api/auth/me`, { headers: { authorization: `Bearer ${token}` } });
      expect(await me.json()).toMatchObject({ email: 'admin@example.com', is_admin: true });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 90_000);

  test('a missing --env-file is a one-line usage error', async () => {
    expectOneLineRefusal(await run(['users', 'create', ...admin, '--env-file', join(siteDir, 'nope.env')]), '--env-file', 'nope.env');
  });
});

describe('cpd users create on PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof createEmptyPostgresDatabase>>;
  beforeAll(async () => {
    db = await createEmptyPostgresDatabase();
  });
  afterAll(() => db?.drop());

  test('a database without cpd tables is not the served one: refused, nothing created in it', async () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    const r = await run(['users', 'create', '--email', 'a@example.com', '--password', 'correct horse battery'], { DATABASE_URL: db.url, DATA_DIR: dataDir });
    expectOneLineRefusal(r, 'no cpd tables');
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const tables = await sql`select tablename from pg_tables where schemaname = 'public'`;
      expect(tables.length).toBe(0);
    } finally {
      await sql.end();
    }
  });
});

describe('cpd models publish never creates a database', () => {
  let artifact: string;
  const publishArgs = () => ['models', 'publish', artifact, '--slug', 'tiny', '--quant', 'int8', '--sdk', 'v1.0'];
  beforeAll(() => {
    artifact = join(mkdtempSync(join(root, 'artifact-')), 'tiny.gguf');
    writeFileSync(artifact, 'not really a model, but bytes to publish');
  });

  test('run from another directory without the environment: refused, and no ./data database appears', async () => {
    const r = await run(publishArgs());
    expectOneLineRefusal(r, 'no database', 'DATA_DIR');
    expect(readdirSync(r.cwd)).toEqual([]);
  });

  test('a PostgreSQL database without cpd tables: refused, nothing created in it', async () => {
    const db = await createEmptyPostgresDatabase();
    try {
      expectOneLineRefusal(await run(publishArgs(), { DATABASE_URL: db.url, DATA_DIR: mkdtempSync(join(root, 'data-')) }), 'no cpd tables');
      const sql = postgres(db.url, { max: 1, onnotice: () => {} });
      try {
        expect((await sql`select tablename from pg_tables where schemaname = 'public'`).length).toBe(0);
      } finally {
        await sql.end();
      }
    } finally {
      await db.drop();
    }
  });

  test('after `cpd migrate` created the database: publishes', async () => {
    const env = { DATA_DIR: join(mkdtempSync(join(root, 'site-')), 'data') };
    const migrated = await run(['migrate'], env);
    expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: '' });
    const r = await run(publishArgs(), env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ slug: 'tiny', quant: 'int8', sdk: 'v1.0' });
  }, 90_000);
});
