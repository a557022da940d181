/**
 * On dist/cpd: a request whose query PostgreSQL refuses (a CHECK constraint no new account
 * passes, added NOT VALID to the served database) answers 500 and logs the SQLSTATE and the
 * constraint; the password, its hash and the email sent as query parameters appear nowhere in
 * the process's stdout or stderr.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import postgres from 'postgres';
import { startBinary } from '../support/binary';
import { createTestDatabase, type TestDatabase } from '../support/db';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('postgres');
});
afterAll(() => db.drop());

test('a failed account insert on the binary: 500, SQLSTATE and constraint logged, no value in stdout or stderr', async () => {
  const sql = postgres(db.url!, { max: 1, onnotice: () => {} });
  const server = await startBinary({ env: { DATABASE_URL: db.url! } });
  try {
    await sql.unsafe('alter table users add constraint users_refuse_new_rows check (false) not valid');
    const email = 'binary-failing-insert@example.com';
    const password = 'Pa55word-the-binary-must-not-log';
    const res = await fetch(`${server.url}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'internal server error' });
    expect(await server.stop()).toBe(0);
    const output = server.logs();
    const unhandled = output.split('\n').find((l) => l.includes('"msg":"unhandled error"'));
    expect(JSON.parse(unhandled!).err.cause).toMatchObject({ sqlstate: '23514', constraint: 'users_refuse_new_rows', table: 'users' });
    for (const value of [email, password, '$argon2', 'Failed query', 'params']) expect(output).not.toContain(value);
  } finally {
    await server.stop();
    await sql.end();
  }
}, 90_000);
