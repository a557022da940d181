import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sql } from 'drizzle-orm';
import { baseEnv } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';

const MAIN = resolve(import.meta.dir, '../../../src/main.ts');

describe('cpd users create', () => {
  let db: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    dataDir = mkdtempSync(join(tmpdir(), 'cpd-users-'));
  });
  afterAll(async () => {
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function cli(...args: string[]) {
    const proc = Bun.spawn([process.execPath, MAIN, 'users', 'create', ...args], {
      env: { ...baseEnv(), DATABASE_URL: db.url!, DATA_DIR: dataDir },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  }

  test('prints {"id","email"} and the account can log in with an argon2id hash', async () => {
    const res = await cli('--email', 'ops@example.com', '--password', 'from the shell', '--phone', '+44 20 7946 0000', '--admin');
    expect(res.code).toBe(0);
    const printed = JSON.parse(res.stdout);
    expect(printed).toEqual({ id: expect.any(String), email: 'ops@example.com' });
    expect(res.stdout).not.toContain('from the shell');
    const [row] = await db.database.query<{ is_admin: boolean; phone: string; password_hash: string }>(
      sql`select is_admin, phone, password_hash from users where id = ${printed.id}`,
    );
    expect(row).toMatchObject({ is_admin: true, phone: '+442079460000' });
    expect(row!.password_hash).toStartWith('$argon2id$v=19$m=19456,t=2,p=1$');
  });

  test('a taken email is a clear error and exit code 1', async () => {
    const res = await cli('--email', 'OPS@example.com', '--password', 'another one');
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('already exists');
    expect(res.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  });

  test('a password outside 8..128 is refused with exit code 1; missing flags are a usage error', async () => {
    const short = await cli('--email', 'short@example.com', '--password', 'short');
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('password');
    const missing = await cli('--email', 'x@example.com');
    expect(missing.code).toBe(2);
    const [row] = await db.database.query<{ n: number }>(sql`select count(*)::int as n from users`);
    expect(row!.n).toBe(1);
  });
});
