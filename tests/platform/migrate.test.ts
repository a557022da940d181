import { describe, expect, test } from 'bun:test';
import { ConfigError } from '../../src/config';
import { sql } from 'drizzle-orm';
import { type Database, migrate, type Migration, openDatabase } from '../../src/platform/db';
import { embeddedMigrations } from '../../src/platform/db/migrations.generated';
import { createEmptyPostgresDatabase, createTestDatabase } from '../support/db';

// Small migrations of our own, so the checks do not depend on what the modules' schemas hold.
const demo: Migration[] = [
  { name: '0000_demo', sql: 'create table demo (id int primary key);\n--> statement-breakpoint\ninsert into demo values (1);' },
  { name: '0001_demo_more', sql: 'insert into demo values (2);' },
];

async function appliedNames(database: Database) {
  const rows = await database.query<{ name: string }>(sql`select name from cpd_migrations where name like '%demo%' order by name`);
  return rows.map((r) => r.name);
}

describe('migrate on PostgreSQL', () => {
  test('replicas migrating one fresh database at once apply each migration exactly once', async () => {
    const fresh = await createEmptyPostgresDatabase();
    const replicas = await Promise.all([1, 2, 3, 4, 5].map(() => openDatabase({ databaseUrl: fresh.url, maxConnections: 2 })));
    try {
      const results = await Promise.all(replicas.map((db) => migrate(db, { migrations: demo })));
      // Every call succeeded; between them each migration ran once.
      expect(results.flat().sort()).toEqual(['0000_demo', '0001_demo_more']);
      expect(results.filter((r) => r.length === 0)).toHaveLength(4);
      expect(await appliedNames(replicas[0]!)).toEqual(['0000_demo', '0001_demo_more']);
      expect(await replicas[0]!.query(sql`select id from demo order by id`)).toEqual([{ id: 1 }, { id: 2 }]);
    } finally {
      await Promise.all(replicas.map((db) => db.close()));
      await fresh.drop();
    }
  });

  test('the embedded migrations apply from scratch under concurrency too', async () => {
    const fresh = await createEmptyPostgresDatabase();
    const replicas = await Promise.all([1, 2, 3].map(() => openDatabase({ databaseUrl: fresh.url, maxConnections: 1 })));
    try {
      const results = await Promise.all(replicas.map((db) => migrate(db)));
      expect(results.flat().sort()).toEqual(embeddedMigrations.map((m) => m.name).sort());
      expect(await migrate(replicas[0]!)).toEqual([]);
    } finally {
      await Promise.all(replicas.map((db) => db.close()));
      await fresh.drop();
    }
  });

  test('a failing migration rolls back entirely and can be retried', async () => {
    const fresh = await createEmptyPostgresDatabase();
    const db = await openDatabase({ databaseUrl: fresh.url, maxConnections: 1 });
    try {
      const broken: Migration[] = [demo[0]!, { name: '0001_broken', sql: 'insert into no_such_table values (1);' }];
      await expect(migrate(db, { migrations: broken })).rejects.toThrow();
      expect(await db.query(sql`select to_regclass('demo') as t`)).toEqual([{ t: null }]);
      expect(await migrate(db, { migrations: demo })).toEqual(['0000_demo', '0001_demo_more']);
    } finally {
      await db.close();
      await fresh.drop();
    }
  });
});

describe('migrate on PGlite', () => {
  test('applies pending migrations once, then nothing; an edited migration is refused', async () => {
    // The test snapshot already holds the embedded migrations; ours come on top.
    const { database: db } = await createTestDatabase('pglite');
    try {
      expect(await migrate(db, { migrations: [demo[0]!] })).toEqual(['0000_demo']);
      expect(await migrate(db, { migrations: demo })).toEqual(['0001_demo_more']);
      expect(await migrate(db, { migrations: demo })).toEqual([]);
      expect(await appliedNames(db)).toEqual(['0000_demo', '0001_demo_more']);
      const edited = [{ ...demo[0]!, sql: `${demo[0]!.sql} -- edited` }, demo[1]!];
      await expect(migrate(db, { migrations: edited })).rejects.toThrow('0000_demo was changed');
    } finally {
      await db.close();
    }
  });
});

describe('one site per database', () => {
  for (const kind of ['postgres', 'pglite'] as const) {
    test(`${kind}: the first run records the site; the other site is refused before anything is applied`, async () => {
      const { database: db, drop } = await createTestDatabase(kind);
      try {
        // The test databases are migrated without a site, like a database from before sites were recorded.
        expect(await migrate(db, { site: 'intl' })).toEqual([]);
        expect(await db.query(sql`select site from cpd_site`)).toEqual([{ site: 'intl' }]);
        expect(await migrate(db, { site: 'intl' })).toEqual([]);
        const refused = await migrate(db, { site: 'cn', migrations: [...embeddedMigrations, ...demo] }).catch((err: Error) => err);
        expect(refused).toBeInstanceOf(ConfigError);
        expect((refused as ConfigError).message).toBe('SITE: this database belongs to the intl site; a SITE=cn process may not use it');
        expect(await db.query(sql`select to_regclass('demo') as t`)).toEqual([{ t: null }]);
        expect(await db.query(sql`select site from cpd_site`)).toEqual([{ site: 'intl' }]);
      } finally {
        await drop();
      }
    });
  }
});
