/**
 * Test databases. Every test file gets its own database:
 *  - postgres: cloned from a template database migrated once per migration set
 *    (CREATE DATABASE … TEMPLATE, ~50 ms) on the real server at 127.0.0.1:5432;
 *  - pglite: an in-memory PGlite loaded from a pre-migrated snapshot (dumpDataDir), so no
 *    initdb per test (cached in memory and under node_modules/.cache).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { type Database, migrate, openDatabase } from '../../src/platform/db';
import { embeddedMigrations } from '../../src/platform/db/migrations.generated';

export type DbKind = 'postgres' | 'pglite';
/** The kinds each DB_KINDS test runs on: both, or those TEST_DB_KINDS names (`make test-fast`: postgres). */
export const DB_KINDS: DbKind[] = kindsFrom(process.env.TEST_DB_KINDS);

function kindsFrom(names: string | undefined): DbKind[] {
  if (!names) return ['postgres', 'pglite'];
  const kinds = names.split(',').map((n) => n.trim());
  const unknown = kinds.filter((k) => k !== 'postgres' && k !== 'pglite');
  if (unknown.length > 0) throw new Error(`TEST_DB_KINDS: unknown ${unknown.join(', ')} (postgres, pglite)`);
  return kinds as DbKind[];
}

export const PG_HOST_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';
const ADMIN_URL = `${PG_HOST_URL}/postgres`;

const migrationsHash = createHash('sha256')
  .update(embeddedMigrations.map((m) => `${m.name}\n${m.sql}`).join('\n'))
  .digest('hex')
  .slice(0, 12);

export interface TestDatabase {
  database: Database;
  /** Connection URL (postgres only): for a second process or a compiled binary on the same database. */
  url: string | null;
  drop(): Promise<void>;
}

let templateReady: Promise<string> | null = null;

/**
 * A test database's name: its kind, when it was made (milliseconds, base 36) and random hex. The
 * time lets a later run tell a database an interrupted run left behind from one in use.
 */
const databaseName = (kind: 'test' | 'empty') => `cpd_${kind}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
const NAMED_WITH_TIME = /^cpd_(?:test|empty)_([0-9a-z]+)_[0-9a-f]+$/;
/** Older than this (by the time in its name) and with nobody connected, a test database is left over. */
const STALE_AFTER_MS = 6 * 60 * 60 * 1000;

/**
 * Drops the test databases that interrupted runs left behind: Ctrl-C or a killed `bun test` skips
 * every drop, and each database is a copy of the template (~8 MB), a hundred or so per run. Only
 * databases whose name carries a time over STALE_AFTER_MS ago and that nobody is connected to; a
 * drop that meets a connection made since is skipped. Answers the names dropped.
 */
export async function sweepStaleDatabases(admin: postgres.Sql, now = Date.now()): Promise<string[]> {
  const rows = await admin<Array<{ datname: string }>>`
    select datname from pg_database d
    where (datname like 'cpd\_test\_%' or datname like 'cpd\_empty\_%')
      and not exists (select 1 from pg_stat_activity a where a.datname = d.datname)`;
  const dropped: string[] = [];
  for (const { datname } of rows) {
    const madeAt = NAMED_WITH_TIME.exec(datname)?.[1];
    if (!madeAt || now - Number.parseInt(madeAt, 36) < STALE_AFTER_MS) continue;
    try {
      await admin.unsafe(`drop database "${datname}"`);
      dropped.push(datname);
    } catch {}
  }
  return dropped;
}

/** Held while the template is built and stale databases are swept (a session advisory lock). */
export const TEMPLATE_LOCK = 7353001;

async function ensureTemplate(): Promise<string> {
  const name = `cpd_tpl_${migrationsHash}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    // Session lock: test processes running in parallel build the template once.
    await admin`select pg_advisory_lock(${TEMPLATE_LOCK})`;
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (!exists) {
      const building = `${name}_build_${randomBytes(3).toString('hex')}`;
      await admin.unsafe(`create database "${building}"`);
      const database = await openDatabase({ databaseUrl: `${PG_HOST_URL}/${building}`, maxConnections: 1 });
      await migrate(database);
      await database.close();
      await admin.unsafe(`alter database "${building}" rename to "${name}"`);
      await admin.unsafe(`alter database "${name}" is_template true`);
    }
    // Once per test process: what earlier, interrupted runs left behind.
    await sweepStaleDatabases(admin).catch((err) => console.warn('could not sweep stale test databases:', err));
    await admin`select pg_advisory_unlock(${TEMPLATE_LOCK})`;
  } finally {
    await admin.end();
  }
  return name;
}

async function createPostgres(): Promise<TestDatabase> {
  templateReady ??= ensureTemplate();
  const template = await templateReady;
  const name = databaseName('test');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    // Test files running in parallel clone one at a time: PostgreSQL refuses a clone while
    // another is copying the same template.
    await admin`select pg_advisory_lock(7353002)`;
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`create database "${name}" template "${template}"`);
        break;
      } catch (err) {
        // "source database is being accessed by other users": a clone by a process without the lock.
        if (attempt > 50 || !/being accessed/.test(String(err))) throw err;
        await Bun.sleep(50 + Math.random() * 100);
      }
    }
  } finally {
    await admin.end(); // ends the session, and with it the lock
  }
  const url = `${PG_HOST_URL}/${name}`;
  const database = await openDatabase({ databaseUrl: url, maxConnections: 10 });
  return {
    database,
    url,
    async drop() {
      await database.close().catch(() => {});
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists "${name}" with (force)`);
      await a.end();
    },
  };
}

let snapshot: Promise<Blob> | null = null;

async function pgliteSnapshot(): Promise<Blob> {
  const dir = join(import.meta.dir, '../../node_modules/.cache/cpd');
  const file = join(dir, `pglite-${migrationsHash}.tar.gz`);
  if (existsSync(file)) return new Blob([await Bun.file(file).arrayBuffer()]);
  // Built through our own migrator, so the snapshot is exactly what `cpd serve` produces.
  const fresh = await openDatabase({ databaseUrl: null });
  await migrate(fresh);
  const blob = await fresh.dump!();
  await fresh.close();
  mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, new Uint8Array(await blob.arrayBuffer()));
  renameSync(tmp, file);
  return blob;
}

async function createPglite(): Promise<TestDatabase> {
  snapshot ??= pgliteSnapshot();
  const database = await openDatabase({ databaseUrl: null, pgliteSnapshot: await snapshot });
  return { database, url: null, drop: () => database.close() };
}

/** A new, empty PostgreSQL database (no migrations applied): for migration and binary tests. */
export async function createEmptyPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = databaseName('empty');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  return {
    url: `${PG_HOST_URL}/${name}`,
    async drop() {
      const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists "${name}" with (force)`);
      await a.end();
    },
  };
}

export function createTestDatabase(kind: DbKind): Promise<TestDatabase> {
  return kind === 'postgres' ? createPostgres() : createPglite();
}
