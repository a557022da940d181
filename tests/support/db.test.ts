/**
 * The test databases that interrupted runs leave behind are swept by the next run: only those whose
 * name says they are over six hours old and that nobody is connected to.
 */
import { afterAll, expect, test } from 'bun:test';
import postgres from 'postgres';
import { PG_HOST_URL, sweepStaleDatabases, TEMPLATE_LOCK } from './db';
import { waitFor } from './wait';

const admin = postgres(`${PG_HOST_URL}/postgres`, { max: 1, onnotice: () => {} });
const HOUR = 60 * 60 * 1000;
const now = Date.now();
const suffix = Math.floor(Math.random() * 0xffffff).toString(16).padStart(6, '0');
const named = (kind: string, age: number, tag: string) => `cpd_${kind}_${(now - age).toString(36)}_${tag}${suffix}`;
const names = {
  staleTest: named('test', 7 * HOUR, 'a1'),
  staleEmpty: named('empty', 7 * HOUR, 'b2'),
  fresh: named('test', 1 * HOUR, 'c3'),
  staleInUse: named('test', 7 * HOUR, 'd4'),
};
const existing = async () =>
  new Set((await admin<Array<{ datname: string }>>`select datname from pg_database where datname in ${admin(Object.values(names))}`).map((r) => r.datname));

afterAll(async () => {
  for (const name of Object.values(names)) await admin.unsafe(`drop database if exists "${name}" with (force)`);
  await admin.end();
});

test('a sweep drops the stale test and empty databases nobody uses, and keeps a fresh one and one in use', async () => {
  // Test files running beside this one sweep too, under this lock: hold it, so only these sweeps drop ours.
  await admin`select pg_advisory_lock(${TEMPLATE_LOCK})`;
  for (const name of Object.values(names)) await admin.unsafe(`create database "${name}"`);
  const user = postgres(`${PG_HOST_URL}/${names.staleInUse}`, { max: 1 });
  await user`select 1`;
  try {
    const dropped = await sweepStaleDatabases(admin, now);
    expect(dropped.filter((d) => d.endsWith(suffix)).sort()).toEqual([names.staleEmpty, names.staleTest].sort());
    expect(await existing()).toEqual(new Set([names.fresh, names.staleInUse]));
  } finally {
    await user.end();
  }
  // Once nobody is connected (its server process has gone), the stale one goes too; the fresh one stays.
  await waitFor(
    async () => (await admin`select count(*)::int as n from pg_stat_activity where datname = ${names.staleInUse}`)[0]!.n === 0,
    'the closed connection to leave pg_stat_activity',
  );
  expect((await sweepStaleDatabases(admin, now)).filter((d) => d.endsWith(suffix))).toEqual([names.staleInUse]);
  expect(await existing()).toEqual(new Set([names.fresh]));
  await admin`select pg_advisory_unlock(${TEMPLATE_LOCK})`;
});
