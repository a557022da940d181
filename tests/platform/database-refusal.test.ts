/**
 * What says "the database is not serving us", on errors the real PostgreSQL raises: a database
 * that does not accept connections (55000), a role refused CONNECT (42501 while connecting), a
 * read-only database (25006), TLS asked of a server without it. Those are outages: 503 on every
 * route, retried by the usage writer. A permission a query lacks (42501 in a query) or another
 * 55000 raised by a query are bugs: 500, and a row they refuse is set aside, not retried forever.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { isDatabaseUnreachable, isTransient, openDatabase } from '../../src/platform/db';
import { errorResponse } from '../../src/platform/http/errors';
import { createEmptyPostgresDatabase, PG_HOST_URL } from '../support/db';
import { captureLogger } from '../support/log-sink';
import { waitFor } from '../support/wait';

const ADMIN_URL = `${PG_HOST_URL}/postgres`;

describe('the database not serving us, told from a failed query (real PostgreSQL)', () => {
  let database: { url: string; drop(): Promise<void> };
  let name: string;
  const role = `cpd_refusal_${randomBytes(4).toString('hex')}`;
  let roleUrl: string;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });

  beforeAll(async () => {
    database = await createEmptyPostgresDatabase();
    name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`create role ${role} login`);
    const owner = postgres(database.url, { max: 1, onnotice: () => {} });
    await owner.unsafe(`create table refusal_t (id int); create sequence refusal_s; grant usage on sequence refusal_s to ${role}`);
    await owner.end();
    const url = new URL(database.url);
    url.username = role;
    roleUrl = url.toString();
  });
  afterAll(async () => {
    await database.drop();
    await admin.unsafe(`drop role if exists ${role}`);
    await admin.end();
  });

  /** The error one statement fails with on a connection of its own to `url`. */
  async function errorOf(url: string, statement: string): Promise<unknown> {
    const client = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
    try {
      await client.unsafe(statement);
      throw new Error(`${statement} did not fail`);
    } catch (err) {
      return err;
    } finally {
      await client.end({ timeout: 1 });
    }
  }

  const answerTo = (err: unknown) => {
    const { log } = captureLogger();
    return errorResponse(err, 'UNKNOWN', log).status;
  };

  /** An outage: unreachable, retried by the batch writer, 503 {"error":"database unavailable"}. */
  async function expectOutage(err: unknown, code: string) {
    expect((err as { code?: string }).code).toBe(code);
    expect(isDatabaseUnreachable(err)).toBe(true);
    expect(isTransient(err)).toBe(true);
    const res = errorResponse(err, 'UNKNOWN', captureLogger().log);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 503, body: { error: 'database unavailable' } });
  }

  /** A bug: neither unreachable nor retried, 500. */
  function expectBug(err: unknown, code: string) {
    expect((err as { code?: string }).code).toBe(code);
    expect(isDatabaseUnreachable(err)).toBe(false);
    expect(isTransient(err)).toBe(false);
    expect(answerTo(err)).toBe(500);
  }

  test('55000: a database that does not accept connections (ALLOW_CONNECTIONS false)', async () => {
    await admin.unsafe(`alter database "${name}" allow_connections false`);
    try {
      await expectOutage(await errorOf(database.url, 'select 1'), '55000');
    } finally {
      await admin.unsafe(`alter database "${name}" allow_connections true`);
    }
  });

  test('42501 while connecting: a role whose CONNECT was revoked; also through drizzle and our pool', async () => {
    await admin.unsafe(`revoke connect on database "${name}" from public`);
    try {
      await expectOutage(await errorOf(roleUrl, 'select 1'), '42501');
      const pool = await openDatabase({ databaseUrl: roleUrl, maxConnections: 1 });
      const viaDrizzle = await pool.query(sql`select 1`).then(
        () => null,
        (err: unknown) => err,
      );
      await pool.close();
      expect(isDatabaseUnreachable(viaDrizzle)).toBe(true);
      expect(answerTo(viaDrizzle)).toBe(503);
    } finally {
      await admin.unsafe(`grant connect on database "${name}" to public`);
    }
  });

  test('42501 in a query: a privilege the role lacks is a bug (500), not an outage', async () => {
    expectBug(await errorOf(roleUrl, 'select * from refusal_t'), '42501');
  });

  test('55000 raised by a query (currval before nextval) is not an outage either', async () => {
    expectBug(await errorOf(roleUrl, `select currval('refusal_s')`), '55000');
  });

  test('25006: a read-only database refuses writes (default_transaction_read_only, as on a standby)', async () => {
    await admin.unsafe(`alter database "${name}" set default_transaction_read_only = on`);
    try {
      await expectOutage(await errorOf(database.url, 'insert into refusal_t values (1)'), '25006');
    } finally {
      await admin.unsafe(`alter database "${name}" reset default_transaction_read_only`);
    }
  });

  test('TLS required of a server without it: a connection-phase failure', async () => {
    const [shown] = await admin<Array<{ ssl: string }>>`show ssl`;
    expect(shown?.ssl).toBe('off'); // the test server runs without TLS
    const err = await errorOf(`${database.url}?sslmode=require`, 'select 1');
    expect(isDatabaseUnreachable(err)).toBe(true);
    expect(answerTo(err)).toBe(503);
  });

  test('a connection ended under a query, then refused at its next start: the query that reopens it is refused at once', async () => {
    // One connection: the slot that held the query in flight is the one reopened.
    const client = postgres(roleUrl, { max: 1, onnotice: () => {}, connect_timeout: 5, backoff: () => 0.05, fetch_types: false });
    await admin.unsafe(`grant connect on database "${name}" to ${role}`);
    try {
      const [backend] = await client<Array<{ pid: number }>>`select pg_backend_pid() as pid`;
      const inFlight = client`select pg_sleep(30)`.then(
        () => null,
        (err: { code?: string }) => err.code,
      );
      await admin.unsafe(`revoke connect on database "${name}" from public, ${role}`);
      await admin`select pg_terminate_backend(${backend!.pid})`;
      // The server's FATAL 57P01 is held for a ReadyForQuery; the socket's close settles it.
      expect(await inFlight).toBe('CONNECTION_CLOSED');
      const next = { code: null as string | null };
      client`select 1`.then(
        () => (next.code = 'served'),
        (err: { code?: string }) => (next.code = err.code ?? 'failed'),
      );
      // Before: held (reconnecting every 50 ms) until CONNECT was granted again.
      await waitFor(() => next.code, 'the query to be refused', { timeoutMs: 10_000 });
      expect(next.code).toBe('42501');
    } finally {
      await admin.unsafe(`grant connect on database "${name}" to public`);
      await client.end({ timeout: 1 });
    }
  });

  test('a serialization failure is retried by the writer but is no outage: its own 503 asks for a retry', () => {
    const err = Object.assign(new Error('could not serialize access'), { code: '40001', severity: 'ERROR' });
    expect(isDatabaseUnreachable(err)).toBe(false);
    expect(isTransient(err)).toBe(true);
  });
});
