import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { type SQL, sql } from 'drizzle-orm';
import { isDatabaseUnreachable, openDatabase } from '../../src/platform/db';
import { createTestDatabase, DB_KINDS, PG_HOST_URL, type TestDatabase } from '../support/db';
import { captureLogger } from '../support/log-sink';
import { startTcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait';

describe('logger', () => {
  test('redacts secret-named fields at the top level and one level down', () => {
    const { log, lines } = captureLogger();
    log.info({ msg: 'x', password: 'p1', token: 't1', user: { authorization: 'a1', cookie: 'c1', secret: 's1', email: 'e@x' } });
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({ level: 'info', password: '[redacted]', token: '[redacted]' });
    expect(line.user).toEqual({ authorization: '[redacted]', cookie: '[redacted]', secret: '[redacted]', email: 'e@x' });
    expect(typeof line.time).toBe('string');
  });

  test('respects the level', () => {
    const { log, lines } = captureLogger('warn');
    log.info('quiet');
    log.warn('loud');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', msg: 'loud' });
  });
});

/**
 * Errors of real failing queries, logged the ways the code logs them ({err}, {error}, an Error
 * alone): the SQLSTATE and the names involved reach the line, the query's values never do.
 */
for (const kind of DB_KINDS) {
  describe(`a failed query logs no values (${kind})`, () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase(kind);
      await db.database.query(sql.raw('create table log_probe (name text primary key, n integer)'));
    });
    afterAll(() => db.drop());

    const logEveryWay = (err: unknown) => {
      const { log, lines } = captureLogger();
      log.error({ err }, 'failed');
      log.warn({ error: err }, 'failed');
      log.error(err as Error);
      return lines;
    };
    const failure = (q: SQL) => db.database.query(q).then(() => expect.unreachable('the query should fail'), (err: unknown) => err);

    test('a value the database cannot parse: 22P02 with the quoted value masked', async () => {
      const lines = logEveryWay(await failure(sql`select ${'int-secret-4711'}::int`));
      for (const line of lines) {
        expect(line).not.toContain('int-secret-4711');
        expect(line).not.toContain('Failed query');
        expect(line).toContain('"sqlstate":"22P02"');
        expect(line).toContain('invalid input syntax for type integer');
      }
    });

    test('a unique violation: constraint and table, not the key PostgreSQL puts in its detail', async () => {
      await db.database.query(sql`insert into log_probe (name) values (${'dup-secret-0815'})`);
      const lines = logEveryWay(await failure(sql`insert into log_probe (name, n) values (${'dup-secret-0815'}, ${424242})`));
      const [asErr, asError, alone] = lines.map((l) => JSON.parse(l));
      for (const logged of [asErr.err, asError.error, alone.err]) expect(logged).toMatchObject({ cause: { sqlstate: '23505', constraint: 'log_probe_pkey', table: 'log_probe' } });
      for (const line of lines) {
        expect(line).not.toContain('dup-secret-0815');
        expect(line).not.toContain('424242');
      }
    });
  });
}

test('a database cut mid-query: the connection error is logged, the query values are not', async () => {
  const target = new URL(PG_HOST_URL);
  const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  // A sleeping query of an earlier run may still be on the server (it runs on after its client is cut): only this run's counts.
  const since = new Date(Date.now() - 1000).toISOString();
  const database = await openDatabase({ databaseUrl: `postgres://${target.username}@127.0.0.1:${proxy.port}/postgres`, maxConnections: 1 });
  try {
    await database.query(sql`select 1`);
    const pending = database.query(sql`select pg_sleep(30), ${'cut-secret-9931'}::text`).catch((err: unknown) => err);
    // The query is on the wire once PostgreSQL runs it. Its own text, not any pg_sleep(30): another
    // test file running in parallel sleeps on the same server.
    const observer = await openDatabase({ databaseUrl: `${PG_HOST_URL}/postgres`, maxConnections: 1 });
    try {
      await waitFor(async () => (await observer.query(sql`select 1 from pg_stat_activity where query like '%pg_sleep(30), $1::text%' and pid <> pg_backend_pid() and backend_start >= ${since}::timestamptz`)).length > 0, 'the query to run');
    } finally {
      await observer.close();
    }
    proxy.cut();
    const err = await pending;
    expect(isDatabaseUnreachable(err)).toBe(true);
    const { log, lines } = captureLogger();
    log.error({ err }, 'failed');
    expect(lines[0]).not.toContain('cut-secret-9931');
    expect(lines[0]).not.toContain('pg_sleep');
    expect(JSON.parse(lines[0]!).err.cause.syscode).toMatch(/^[A-Z_]+$/);
  } finally {
    await database.close().catch(() => {});
    await proxy.close();
  }
});
