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
export const DB_KINDS: DbKind[] = ['postgres', 'pglite'];

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

async function ensureTemplate(): Promise<string> {
  const name = `cpd_tpl_${migrationsHash}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    // Session lock: test processes running in parallel build the template once.
    await admin`select pg_advisory_lock(7353001)`;
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
    await admin`select pg_advisory_unlock(7353001)`;
  } finally {
    await admin.end();
  }
  return name;
}

async function createPostgres(): Promise<TestDatabase> {
  templateReady ??= ensureTemplate();
  const template = await templateReady;
  const name = `cpd_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.unsafe(`create database "${name}" template "${template}"`);
      break;
    } catch (err) {
      // "source database is being accessed by other users": another clone is in progress.
      if (attempt > 50 || !/being accessed/.test(String(err))) throw err;
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
  await admin.end();
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
  const name = `cpd_empty_${randomBytes(6).toString('hex')}`;
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
